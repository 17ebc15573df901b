/* The set-conditional kernel of the cuda backend's IF nodes
 * (runtime/device/dev_cuda.c, entry RT_CUDA_SET_COND_ENTRY): sets a
 * conditional graph handle from an int32 flag in device memory, so a
 * gated phase runs when its flag is nonzero at that point of the replay.
 * gen/build.c appends this file to every engine's kernels.cu, so the
 * engine's cubins and PTX carry it and a deployment needs no NVRTC.
 * cudaGraphSetConditional (CUDA 12.3+) is a device-runtime builtin the
 * driver binds when it loads the module: no -rdc or libcudadevrt. NVRTC
 * only (__CUDACC_RTC__): the SIMT emulator has no graphs. */
#ifdef __CUDACC_RTC__
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);

extern "C" __global__ void sw_graph_set_cond(unsigned long long handle, const int *flag)
{
	cudaGraphSetConditional(handle, *flag != 0 ? 1u : 0u);
}
#endif
