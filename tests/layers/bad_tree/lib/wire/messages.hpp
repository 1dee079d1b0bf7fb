// A stand-in header of the wire layer.
#pragma once
