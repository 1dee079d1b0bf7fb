// A stand-in header of the transport layer.
#pragma once
