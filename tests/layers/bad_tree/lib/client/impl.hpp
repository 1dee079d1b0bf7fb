// A stand-in header of the client layer.
#pragma once
