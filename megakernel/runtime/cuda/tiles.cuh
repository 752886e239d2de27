// Every tile function of the ISA, for the builds that run Programs: the discrete kernels
// (discrete/kernels.cu, one op family per kernel) and the megakernel (one loop over the words).
#pragma once

#include "attention.cuh"
#include "gdn.cuh"
#include "gemv_tile.cuh"
#include "small_ops.cuh"
