// A stand-in header of lib/ itself.
#pragma once
