/* The struct layouts and constants runtime/device/dev_cuda_api.h restates
 * from cuda.h and cublasLt.h (the runtime dlopens the driver and cuBLASLt and
 * includes neither header): compiled once against the real headers (-DREAL)
 * and once against ours, the two programs must print the same lines
 * (tests/test_gpu_check.c runs both with this machine's CUDA toolkit). */
#include <stdio.h>
#include <stddef.h>
#ifdef REAL
#include <cuda.h>
#include <cublasLt.h>
#else
#include "dev_cuda_api.h"
#endif
#define P(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))
#define S(t) printf("sizeof " #t " %zu\n", sizeof(t))
int main(void)
{
	S(CUgraphEdgeData); P(CUgraphEdgeData, type);
	S(CUDA_CONDITIONAL_NODE_PARAMS); P(CUDA_CONDITIONAL_NODE_PARAMS, type);
	P(CUDA_CONDITIONAL_NODE_PARAMS, size); P(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out);
	P(CUDA_CONDITIONAL_NODE_PARAMS, ctx);
	S(CUgraphNodeParams); P(CUgraphNodeParams, conditional); P(CUgraphNodeParams, reserved2);
	S(cublasLtMatmulHeuristicResult_t); P(cublasLtMatmulHeuristicResult_t, workspaceSize);
	P(cublasLtMatmulHeuristicResult_t, state); P(cublasLtMatmulHeuristicResult_t, wavesCount);
	S(cublasLtMatmulAlgo_t); S(CUgraphConditionalHandle); S(CUdeviceptr);
	printf("%d %d %d %d %d %d %d %d %d %d %d\n", CU_GRAPH_NODE_TYPE_CONDITIONAL,
	       CU_GRAPH_COND_TYPE_IF, CU_GRAPH_COND_ASSIGN_DEFAULT, CU_STREAM_CAPTURE_MODE_RELAXED,
	       CU_STREAM_SET_CAPTURE_DEPENDENCIES, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
	       CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_COMPUTE_32F, CUDA_R_16BF,
	       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
	printf("%d %d %d %d\n", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
	       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CUDA_ERROR_INVALID_CONTEXT,
	       CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
	return 0;
}
