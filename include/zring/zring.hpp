// zring/zring.hpp - the whole public API of zring.
#pragma once

#include <zring/compressed_all_reduce.hpp>
#include <zring/compression.hpp>
#include <zring/config.hpp>
#include <zring/error.hpp>
#include <zring/shared_tensors.hpp>
#include <zring/tensor.hpp>
#include <zring/version.hpp>
