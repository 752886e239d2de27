"""The GPU runtime: every op's CUDA (`cuda/`, one implementation shared by the megakernel and the
discrete build), NVRTC builds (`cuda_build`), the device weight arena's fp8 unit layout
(`weight_layout`), synthetic weights generated on the GPU (`gpu_synthetic`), device weights and sessions
(`device`), the persistent megakernel's host side (`persistent`) and the session pool (`session_pool`).
CuPy is imported inside functions, so every module imports on a machine without a GPU. May import the
model layer, the ISA and the compiler; never generation, measurement or the CLI.
"""
