// A stand-in header of the collective layer.
#pragma once
