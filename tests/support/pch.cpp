// pch.cpp - carries the precompiled header (Boost.Test and a few standard
// headers) that the test executables reuse; never run.
int main() { return 0; }
