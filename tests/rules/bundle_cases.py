"""Rule-test cases: CASES[rule_id] = {"fires": {name: bundle}, "quiet": {name: bundle}} (written by build_bundles.py)."""
from bundle_lib import *

CASES = {}


def case(rule, kind, name, **bundle):
    CASES.setdefault(rule, {"fires": {}, "quiet": {}})[kind][name] = bundle


SG2 = "python3 -m sglang.launch_server --model-path /models/Qwen3-32B --tp 2 --host 0.0.0.0 --port 30000"
SG4 = "python3 -m sglang.launch_server --model-path /models/Llama-3.3-70B-Instruct --tp 4 --host 0.0.0.0 --port 30000"
V2 = "vllm serve /models/Qwen3-32B --tensor-parallel-size 2"
V4 = "vllm serve /models/Llama-3.3-70B-Instruct --tensor-parallel-size 4 --max-model-len 32768"

PYNCCL_INIT = [fr("NCCLLibrary.ncclCommInitRank", "sglang/srt/distributed/device_communicators/pynccl_wrapper.py", 403),
               fr("PyNcclCommunicator.__init__", "sglang/srt/distributed/device_communicators/pynccl.py", 120)] + INIT_MP
NATIVE_BOOT = [nat("accept", "libc.so.6"), nat("ncclSocketAccept", "libnccl.so.2"), nat("bootstrapInit", "libnccl.so.2"),
               nat("ncclCommInitRankFunc", "libnccl.so.2"), nat("groupLaunch", "libnccl.so.2"), nat("ncclGroupEndInternal", "libnccl.so.2"),
               nat("ncclCommInitRankConfig", "libnccl.so.2"), nat("ffi_call_unix64", "libffi.so.8")] + PYNCCL_INIT
TCPSTORE = [fr("_create_c10d_store", "torch/distributed/rendezvous.py", 199), fr("_tcp_rendezvous_handler", "torch/distributed/rendezvous.py", 232),
            fr("init_process_group", "torch/distributed/distributed_c10d.py", 1892),
            fr("_time_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 97),
            fr("_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 83)] + INIT_DIST
TCPSTORE_NATIVE = [nat("clock_nanosleep", "libc.so.6"), nat("nanosleep", "libc.so.6"), nat("c10d::TCPStore::waitForWorkers", "libtorch_cpu.so"),
                   nat("c10d::TCPStore::TCPStore", "libtorch_cpu.so")] + TCPSTORE
V_PYNCCL_WARMUP = [fr("synchronize", "torch/cuda/streams.py", 107),
                   fr("PyNcclCommunicator.__init__", "vllm/distributed/device_communicators/pynccl.py", 138),
                   fr("CudaCommunicator.__init__", "vllm/distributed/device_communicators/cuda_communicator.py", 56),
                   fr("GroupCoordinator.__init__", "vllm/distributed/parallel_state.py", 285),
                   fr("init_model_parallel_group", "vllm/distributed/parallel_state.py", 1015),
                   fr("initialize_model_parallel", "vllm/distributed/parallel_state.py", 1262),
                   fr("ensure_model_parallel_initialized", "vllm/distributed/parallel_state.py", 1312)] + V_INIT_DEVICE
V_TCPSTORE = [fr("_create_c10d_store", "torch/distributed/rendezvous.py", 199), fr("_tcp_rendezvous_handler", "torch/distributed/rendezvous.py", 232),
              fr("init_process_group", "torch/distributed/distributed_c10d.py", 1892),
              fr("init_distributed_environment", "vllm/distributed/parallel_state.py", 1120)] + V_INIT_DEVICE
BARRIER_CAPTURE = [fr("barrier", "torch/distributed/distributed_c10d.py", 4812), fr("GroupCoordinator.barrier", "sglang/srt/distributed/parallel_state.py", 1242)] + CAPTURE_ONE
ALLREDUCE_SYNC = [fr("synchronize", "torch/cuda/__init__.py", 1083), fr("PyNcclCommunicator.all_reduce", "sglang/srt/distributed/device_communicators/pynccl.py", 168),
                  fr("GroupCoordinator._all_reduce_out_place", "sglang/srt/distributed/parallel_state.py", 640),
                  fr("GroupCoordinator.all_reduce", "sglang/srt/distributed/parallel_state.py", 602),
                  fr("tensor_model_parallel_all_reduce", "sglang/srt/distributed/communication_op.py", 14),
                  fr("RowParallelLinear.forward", "sglang/srt/layers/linear.py", 1361)] + FORWARD[:1] + FORWARD[1:]
LOADER_MAIN = [fr("wait", "threading.py", 331), fr("result", "concurrent/futures/_base.py", 451),
               fr("buffered_multi_thread_safetensors_weights_iterator", "sglang/srt/model_loader/weight_utils.py", 1372),
               fr("DefaultModelLoader._get_weights_iterator.<locals>.<genexpr>", "sglang/srt/model_loader/loader.py", 737),
               fr("Qwen3ForCausalLM.load_weights", "sglang/srt/models/qwen3.py", 512)] + LOAD
LOADER_WORKER = thread([fr("buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file", "sglang/srt/model_loader/weight_utils.py", 1354),
                        fr("_WorkItem.run", "concurrent/futures/thread.py", 58), fr("_worker", "concurrent/futures/thread.py", 83),
                        fr("Thread.run", "threading.py", 1010), fr("Thread._bootstrap_inner", "threading.py", 1073),
                        fr("Thread._bootstrap", "threading.py", 1030)], name="ThreadPoolExecutor-1_0", tid=4391, active=True)
LOADER_WORKER_OPEN = thread([nat("open64", "libc.so.6"), nat("std::sys::fs::unix::File::open_c", "safetensors/_safetensors_rust.abi3.so"),
                             nat("safetensors_rust::Open::new", "safetensors/_safetensors_rust.abi3.so"),
                             fr("buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file", "sglang/srt/model_loader/weight_utils.py", 1354),
                             fr("_WorkItem.run", "concurrent/futures/thread.py", 58), fr("_worker", "concurrent/futures/thread.py", 83),
                             fr("Thread._bootstrap", "threading.py", 1030)], name="ThreadPoolExecutor-1_0", tid=4391)
BARRIER_AFTER_LOAD = [fr("monitored_barrier", "torch/distributed/distributed_c10d.py", 5435),
                      fr("dist_barrier_after_load", "sglang/srt/model_executor/model_runner_components/load_model_utils.py", 387),
                      fr("ModelRunner.load_model", "sglang/srt/model_executor/model_runner.py", 1406)] + MODEL_RUNNER
FI_BUILD = [fr("Popen.wait", "subprocess.py", 1264), fr("Popen.communicate", "subprocess.py", 1209), fr("run", "subprocess.py", 550),
            fr("run_ninja", "flashinfer/jit/cpp_ext.py", 297), fr("JitSpec.build", "flashinfer/jit/core.py", 262),
            fr("JitSpec.build_and_load", "flashinfer/jit/core.py", 295),
            fr("get_batch_prefill_module", "flashinfer/prefill.py", 331),
            fr("BatchPrefillWithPagedKVCacheWrapper.plan", "flashinfer/prefill.py", 1604),
            fr("FlashInferIndicesUpdaterPrefill.update", "sglang/srt/layers/attention/flashinfer_backend.py", 1180),
            fr("FlashInferAttnBackend.init_forward_metadata_capture_cuda_graph", "sglang/srt/layers/attention/flashinfer_backend.py", 700)] + CAPTURE_ONE
FI_LOCK = [fr("BaseFileLock.acquire", "filelock/_api.py", 344),
           fr("BaseFileLock.__enter__", "filelock/_api.py", 375),
           fr("JitSpec.build_and_load", "flashinfer/jit/core.py", 291),
           fr("get_batch_prefill_module", "flashinfer/prefill.py", 331),
           fr("BatchPrefillWithPagedKVCacheWrapper.plan", "flashinfer/prefill.py", 1604),
           fr("FlashInferIndicesUpdaterPrefill.update", "sglang/srt/layers/attention/flashinfer_backend.py", 1180)] + CAPTURE_ONE
CA_REGISTER = [fr("CustomAllreduce.register_graph_buffers", "vllm/distributed/device_communicators/custom_all_reduce.py", 240),
               fr("CustomAllreduce.capture", "vllm/distributed/device_communicators/custom_all_reduce.py", 178),
               fr("GroupCoordinator.graph_capture", "vllm/distributed/parallel_state.py", 412),
               fr("graph_capture", "vllm/distributed/parallel_state.py", 1201),
               fr("GPUModelRunner.capture_model", "vllm/v1/worker/gpu_model_runner.py", 3480),
               fr("Worker.compile_or_warm_up_model", "vllm/v1/worker/gpu_worker.py", 384),
               fr("WorkerWrapperBase.execute_method", "vllm/worker/worker_base.py", 628),
               fr("WorkerProc.worker_busy_loop", "vllm/v1/executor/multiproc_executor.py", 778),
               fr("WorkerProc.worker_main", "vllm/v1/executor/multiproc_executor.py", 720)] + SPAWN
V_ALLREDUCE_WARM = [fr("synchronize", "torch/cuda/__init__.py", 1083),
                    fr("PyNcclCommunicator.all_reduce", "vllm/distributed/device_communicators/pynccl.py", 163),
                    fr("CudaCommunicator.all_reduce", "vllm/distributed/device_communicators/cuda_communicator.py", 98),
                    fr("GroupCoordinator._all_reduce_out_place", "vllm/distributed/parallel_state.py", 500),
                    fr("all_reduce", "vllm/distributed/parallel_state.py", 120)] + V_PROFILE
DEEPGEMM_TP0 = [fr("Popen.wait", "subprocess.py", 1264), fr("run", "subprocess.py", 550),
                fr("build", "deep_gemm/jit/compiler.py", 181),
                fr("_maybe_compile_deep_gemm_one_type_all", "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py", 190),
                fr("deep_gemm_execution_hook", "sglang/srt/layers/deep_gemm_wrapper/compile_utils.py", 528),
                fr("gemm_nt_f8f8bf16", "sglang/srt/layers/deep_gemm_wrapper/entrypoint.py", 80),
                fr("fp8_linear", "sglang/srt/layers/quantization/fp8_utils.py", 466)] + FORWARD
SAMPLER = [fr("apply_top_k_top_p", "vllm/v1/sample/ops/topk_topp_sampler.py", 240),
           fr("TopKTopPSampler.forward_native", "vllm/v1/sample/ops/topk_topp_sampler.py", 96),
           fr("Sampler.sample", "vllm/v1/sample/sampler.py", 167), fr("Sampler.forward", "vllm/v1/sample/sampler.py", 95),
           fr("_call_impl", "torch/nn/modules/module.py", 1784),
           fr("GPUModelRunner._dummy_sampler_run", "vllm/v1/worker/gpu_model_runner.py", 3243)] + V_PROFILE
SS_HEADER = "State  Recv-Q Send-Q Local Address:Port  Peer Address:Port Process\n"

# =================================================================== distributed.yaml

case("nccl-init-stack", "fires", "pynccl-init-tp4", meta=meta(tp=4), cmdline=SG4,
     log=sg_log("nccl", tp=4), stacks=stacks_all(4, lambda i: PYNCCL_INIT), gpus=gpus(4, util=0, mem=(1200, 1200)))
case("nccl-init-stack", "fires", "vllm-tcpstore-client", meta=meta("vllm", tp=2), cmdline=V2,
     log=v_log("header"), stacks=stacks_all(2, lambda i: V_TCPSTORE, engine="vllm"))
case("nccl-init-stack", "quiet", "same-stacks-multinode", meta=meta(tp=16, nnodes=2),
     cmdline=SG4.replace("--tp 4", "--tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.1.0.5:5000"),
     log=sg_log("init_begin", tp=8), stacks={"TP0": rank_stack(0, TCPSTORE_NATIVE, tp=16)})
case("nccl-init-stack", "quiet", "first-allreduce-spinning", meta=meta(gpu="NVIDIA L40S", cc="8.9", tp=2), cmdline=V2,
     log=v_log("dist"), stacks=stacks_all(2, lambda i: V_PYNCCL_WARMUP, engine="vllm", active=True), gpus=gpus(2, "NVIDIA L40S", "8.9", util=100))

case("nccl-init-native-idle", "fires", "bootstrap-accept-gpus-idle", meta=meta(tp=4), cmdline=SG4, log=sg_log("nccl", tp=4),
     stacks={"TP0": rank_stack(0, NATIVE_BOOT, tp=4), "TP1": rank_stack(1, NATIVE_BOOT, tp=4)}, gpus=gpus(4, util=0, mem=(900, 900)))
case("nccl-init-native-idle", "quiet", "collective-spinning-gpus-busy", meta=meta(gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=2), cmdline=SG2,
     log=sg_log("nccl"), stacks=stacks_all(2, lambda i: [nat("cuCtxSynchronize", "libcuda.so.1")] + ALLREDUCE_SYNC, active=True),
     gpus=gpus(2, "NVIDIA GeForce RTX 4090", "8.9", util=100))

case("nccl-init-log-last", "fires", "sglang-0.5.23-tp4", meta=meta(tp=4), cmdline=SG4, log=sg_log("nccl", tp=4))
case("nccl-init-log-last", "fires", "sglang-0.5.9-old-line", meta=meta(tp=2, version="0.5.9"), cmdline=SG2, log=sg_log("init_begin", old=True))
case("nccl-init-log-last", "quiet", "init-done-loading", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4))
case("nccl-init-log-last", "quiet", "nccl-port-taken", meta=meta(tp=2), cmdline=SG2,
     log=sg_log("init_begin", extra=["[2026-11-29 23:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                                      "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 30005, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use"]))

case("nccl-init-version-line-last", "fires", "vllm-tp4-after-version", meta=meta("vllm", gpu="NVIDIA A100-SXM4-80GB", cc="8.0", tp=4), cmdline=V4,
     log=v_log("dist", tp=4))
case("nccl-init-version-line-last", "quiet", "version-then-arch-warning", meta=meta(None, gpu="NVIDIA B200", cc="10.0", tp=8),
     log="node7:31337:31337 [0] NCCL INFO Bootstrap : Using eth0:10.2.0.7<0>\nnode7:31337:31337 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
         "node7:31337:31402 [3] NCCL INFO ncclMaxSharedMem 102400 exceeds device/fn maxSharedMem 101376\n")
case("nccl-init-version-line-last", "quiet", "moved-on-to-weights", meta=meta("vllm", tp=4), cmdline=V4, log=v_log("load_begin", tp=4))

case("nccl-init-interposer", "fires", "vgpu-shim-vllm", meta=meta("vllm", gpu="NVIDIA L40S", cc="8.9", tp=2), cmdline=V2,
     env=env(LD_PRELOAD="/usr/local/vgpu/libvgpu.so", CUDA_VISIBLE_DEVICES="0,1"), log=v_log("dist"))
case("nccl-init-interposer", "quiet", "shim-but-stuck-later", meta=meta("vllm", gpu="NVIDIA L40S", cc="8.9", tp=2), cmdline=V2,
     env=env(LD_PRELOAD="/usr/local/vgpu/libvgpu.so"), log=v_log("kv"))

case("nccl-init-interposer-prior", "fires", "meta-only-tp4", meta=meta("vllm", gpu="NVIDIA A10", cc="8.6", tp=4),
     cmdline="vllm serve /models/Qwen2.5-32B-Instruct --tensor-parallel-size 4", env=env(LD_PRELOAD="/opt/hami/libvgpu.so"))
case("nccl-init-interposer-prior", "quiet", "single-gpu", meta=meta("vllm", gpu="NVIDIA A10", cc="8.6", tp=1),
     cmdline="vllm serve /models/Qwen2.5-7B-Instruct", env=env(LD_PRELOAD="/opt/hami/libvgpu.so"))

case("nccl-init-symmetric-memory", "fires", "vllm-symm-mem-env", meta=meta("vllm", gpu="NVIDIA B200", cc="10.0", tp=4),
     cmdline="vllm serve /models/Llama-3.1-405B-Instruct-FP8 --tensor-parallel-size 4", env=env(VLLM_USE_NCCL_SYMM_MEM="1", NCCL_CUMEM_ENABLE="1"))
case("nccl-init-symmetric-memory", "fires", "sglang-symm-mem-flag", meta=meta(gpu="NVIDIA GB200", cc="10.0", tp=4),
     cmdline=SG4 + " --enable-symm-mem", log=sg_log("nccl", tp=4))
case("nccl-init-symmetric-memory", "quiet", "symm-mem-but-past-weights", meta=meta(gpu="NVIDIA GB200", cc="10.0", tp=4),
     cmdline=SG4 + " --enable-symm-mem", log=sg_log("capture_begin", tp=4))

SPLIT_LOG = sg_log("init_begin", tp=4) .rstrip("\n").split("\n")
SPLIT_LOG += ["[2026-11-29 23:00:08 TP0] sglang is using nccl==2.27.5"] + [f"[2026-11-29 23:00:10 TP{i}] Init parallel ends. elapsed=2.4{i} s" for i in range(3)]
case("nccl-init-ranks-split", "fires", "tp3-never-finished", meta=meta(tp=4), cmdline=SG4, log="\n".join(SPLIT_LOG) + "\n")
case("nccl-init-ranks-split", "quiet", "all-ranks-loading", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4))

MN = "python3 -m sglang.launch_server --model-path /models/DeepSeek-V3 --tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.1.0.5:5000 --trust-remote-code"
case("multinode-rank0-waits-for-workers", "fires", "rank0-tcpstore-master", meta=meta(tp=16, nnodes=2), cmdline=MN,
     log=sg_log("init_begin", tp=8), stacks={"TP0": rank_stack(0, TCPSTORE_NATIVE, tp=16)})
case("multinode-rank0-waits-for-workers", "fires", "gloo-full-mesh", meta=meta(tp=16, nnodes=2), cmdline=MN,
     stacks={"TP1": rank_stack(1, [nat("poll", "libc.so.6"), nat("c10d::TCPStore::doWait", "libtorch_cpu.so"), nat("gloo::rendezvous::Context::connectFullMesh", "libtorch_cpu.so"),
                                   nat("c10d::ProcessGroupGloo::ProcessGroupGloo", "libtorch_cpu.so"),
                                   fr("_new_process_group_helper", "torch/distributed/distributed_c10d.py", 2169),
                                   fr("new_group", "torch/distributed/distributed_c10d.py", 5863)] + INIT_MP, tp=16)})
case("multinode-rank0-waits-for-workers", "quiet", "single-node-same-stack", meta=meta(tp=2), cmdline=SG2,
     log=sg_log("init_begin"), stacks={"TP0": rank_stack(0, TCPSTORE_NATIVE)})

case("multinode-init-log-last", "fires", "node0-log", meta=meta(tp=16, nnodes=2), cmdline=MN, log=sg_log("nccl", tp=8))
case("multinode-init-log-last", "quiet", "multinode-past-init", meta=meta(tp=16, nnodes=2), cmdline=MN, log=sg_log("load_end", tp=8))

case("multinode-rendezvous-errors", "fires", "store-clients-timeout", meta=meta(tp=16, nnodes=2), cmdline=MN,
     log=sg_log("init_begin", tp=8, extra=["[2026-11-29 23:10:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                                            "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 8/16 clients joined."]))
case("multinode-rendezvous-errors", "fires", "nccl-net-warn", meta=meta("vllm", tp=8, nnodes=2),
     log="(Worker_TP0 pid=4200) INFO 11-29 23:01:00 [pynccl.py:103] vLLM is using nccl==2.27.3\n"
         "gpu-a:4200:4311 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0> [1]docker0:172.17.0.1<0>\n"
         "gpu-a:4200:4311 [0] misc/socket.cc:484 NCCL WARN Net : Connect to 172.17.0.1<43121> failed : No route to host\n")
case("multinode-rendezvous-errors", "quiet", "warmup-refused-single-node", meta=meta(tp=1, nnodes=1),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("uvicorn", tp=1, extra=["[2026-11-29 23:02:00] Initialization failed. warmup error: requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=30000): Max retries exceeded (Caused by NewConnectionError: [Errno 111] Connection refused)"]))

case("multinode-prior", "fires", "two-nodes-meta-only", meta=meta(gpu="NVIDIA H100 80GB HBM3", tp=16, nnodes=2), cmdline=MN)
case("multinode-prior", "quiet", "two-nodes-in-capture", meta=meta(tp=16, nnodes=2), cmdline=MN, log=sg_log("capture_begin", tp=8))

P2P_LINES = [f"gpu-w1:61200:61321 [{i}] NCCL INFO Channel {c:02d}/0 : {i}[{i}] -> {(i+1)%4}[{(i+1)%4}] via P2P/IPC" for c in range(2) for i in range(4)]
case("nccl-p2p-channels-last", "fires", "vllm-ipc-channels", meta=meta("vllm", gpu="NVIDIA L40S", cc="8.9", tp=4), cmdline=V4,
     env=env(NCCL_DEBUG="INFO"), log=v_log("dist", tp=4, extra=P2P_LINES))
case("nccl-p2p-channels-last", "quiet", "channels-then-init-complete", meta=meta("vllm", gpu="NVIDIA L40S", cc="8.9", tp=4), cmdline=V4,
     env=env(NCCL_DEBUG="INFO"), log=v_log("dist", tp=4, extra=P2P_LINES + ["gpu-w1:61200:61321 [0] NCCL INFO Connected all rings",
                                                                              "gpu-w1:61200:61321 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9f - Init COMPLETE",
                                                                              v_line("Starting to load model /models/Llama-3.3-70B-Instruct...", "gpu_model_runner.py:2602", "Worker_TP0", 4200)]))

case("nccl-p2p-first-collective-spins", "fires", "rtx4090-warmup-allreduce", meta=meta("vllm", gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=2), cmdline=V2,
     log=v_log("dist"), stacks=stacks_all(2, lambda i: V_PYNCCL_WARMUP, engine="vllm", active=True), gpus=gpus(2, "NVIDIA GeForce RTX 4090", "8.9", util=100))
case("nccl-p2p-first-collective-spins", "quiet", "nvlink-h100", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2), cmdline=V2,
     log=v_log("dist"), stacks=stacks_all(2, lambda i: V_PYNCCL_WARMUP, engine="vllm", active=True), gpus=gpus(2, "NVIDIA H100 80GB HBM3", "9.0", util=100))

case("nccl-p2p-iommu-faults", "fires", "amd-vi-page-faults", meta=meta("vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=2), cmdline=V2, log=v_log("dist"),
     dmesg="[ 8123.442100] nvidia 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000e address=0xfb800000 flags=0x0020]\n"
           "[ 8123.442190] nvidia 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000e address=0xfb800040 flags=0x0020]\n")
case("nccl-p2p-iommu-faults", "quiet", "benign-driver-load", meta=meta("vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=2), cmdline=V2, log=v_log("dist"),
     dmesg="[    5.120000] nvidia: loading out-of-tree module taints kernel.\n[    5.310000] nvidia-nvlink: Nvlink Core is being initialized, major device number 511\n"
           "[    5.400000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15\n")

case("nccl-p2p-pcie-prior", "fires", "l40s-tp4-meta", meta=meta("vllm", gpu="NVIDIA L40S", cc="8.9", tp=4))
case("nccl-p2p-pcie-prior", "quiet", "l40s-single-gpu", meta=meta("vllm", gpu="NVIDIA L40S", cc="8.9", tp=1))
case("nccl-p2p-pcie-prior", "quiet", "h100-sxm-tp8", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=8))

case("nccl-build-lacks-arch", "fires", "b200-old-nccl-warning", meta=meta("vllm", gpu="NVIDIA B200", cc="10.0", tp=8), env=env(NCCL_DEBUG="INFO"),
     log=v_log("dist", tp=2, nccl="2.21.5", extra=["dgx-b2:9120:9120 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
                                                   "dgx-b2:9120:9188 [0] NCCL INFO ncclMaxSharedMem 102400 exceeds device/fn maxSharedMem 101376",
                                                   "dgx-b2:9121:9190 [1] NCCL INFO ncclMaxSharedMem 102400 exceeds device/fn maxSharedMem 101376"]))
case("nccl-build-lacks-arch", "quiet", "healthy-nccl-info", meta=meta("vllm", gpu="NVIDIA B200", cc="10.0", tp=2), env=env(NCCL_DEBUG="INFO"),
     log=v_log("dist", nccl="2.27.3", extra=["dgx-b2:9120:9120 [0] NCCL INFO NCCL version 2.27.3+cuda12.9",
                                             "dgx-b2:9120:9188 [0] NCCL INFO ncclCommInitRank comm 0x5601 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - Init COMPLETE"]))

case("nccl-version-predates-arch", "fires", "rtx5090-nccl-2.21", meta=meta("vllm", gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=2), cmdline=V2,
     log=v_log("dist", nccl="2.21.5"))
case("nccl-version-predates-arch", "fires", "b200-sglang-nccl-2.21", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=4), cmdline=SG4,
     log=sg_log("nccl", tp=4, nccl="2.21.5"))
case("nccl-version-predates-arch", "quiet", "rtx5090-recent-nccl", meta=meta("vllm", gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=2), cmdline=V2,
     log=v_log("dist", nccl="2.27.3"))
case("nccl-version-predates-arch", "quiet", "h100-nccl-2.21", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2), cmdline=V2,
     log=v_log("dist", nccl="2.21.5"))

TBO = "python3 -m sglang.launch_server --model-path /models/DeepSeek-V3 --tp 8 --enable-dp-attention --dp 8 --moe-a2a-backend deepep --enable-two-batch-overlap"
case("nccl-concurrent-comms-prior", "fires", "two-batch-overlap-meta", meta=meta(tp=8), cmdline=TBO)
case("nccl-concurrent-comms-prior", "quiet", "two-batch-overlap-started", meta=meta(tp=8), cmdline=TBO, log=sg_log("ready", tp=2))

# =================================================================== collective.yaml

case("custom-allreduce-stack", "fires", "vllm-register-graph-buffers", meta=meta("vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=2), cmdline=V2,
     log=v_log("kv", extra=["Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:06<00:00, 11.2it/s]"]),
     stacks=stacks_all(2, lambda i: CA_REGISTER, engine="vllm"))
case("custom-allreduce-stack", "fires", "sglang-ipc-buffer-exchange", meta=meta(tp=4), cmdline=SG4, log=sg_log("nccl", tp=4),
     stacks=stacks_all(4, lambda i: [fr("broadcast_object_list", "torch/distributed/distributed_c10d.py", 3480),
                                      fr("CustomAllreduce.create_shared_buffer", "sglang/srt/distributed/device_communicators/custom_all_reduce.py", 310),
                                      fr("CustomAllreduce.__init__", "sglang/srt/distributed/device_communicators/custom_all_reduce.py", 172)] + INIT_MP))
case("custom-allreduce-stack", "quiet", "pynccl-allreduce-only", meta=meta("vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=2), cmdline=V2,
     log=v_log("load_end"), stacks=stacks_all(2, lambda i: V_ALLREDUCE_WARM, engine="vllm"))

case("custom-allreduce-graph-registration-last", "fires", "sglang-registering-last", meta=meta(tp=4), cmdline=SG4,
     log=sg_log("capture_begin", tp=4, extra=["Capturing batches (bs=1 avail_mem=30.90 GB): 100%|██████████| 35/35 [00:11<00:00,  3.1it/s]",
                                               "[2026-11-29 23:01:30 TP0] Registering 4480 cuda graph addresses"]))
case("custom-allreduce-graph-registration-last", "quiet", "registered-and-ready", meta=meta(tp=4), cmdline=SG4,
     log=sg_log("capture_begin", tp=4, extra=["[2026-11-29 23:01:30 TP0] Registering 4480 cuda graph addresses"])
     + "\n".join(l for n, ls in sg_stages(tp=4) if n in ("capture_end", "summary", "uvicorn", "warmup_get", "ready") for l in ls) + "\n")

case("collective-spin-all-gpus-busy", "fires", "a100-pcie-tp4-all-spinning", meta=meta(gpu="NVIDIA A100 80GB PCIe", cc="8.0", tp=4), cmdline=SG4,
     log=sg_log("capture_begin", tp=4), stacks=stacks_all(4, lambda i: [nat("cuCtxSynchronize", "libcuda.so.1")] + ALLREDUCE_SYNC, active=True),
     gpus=gpus(4, "NVIDIA A100 80GB PCIe", "8.0", util=100))
case("collective-spin-all-gpus-busy", "quiet", "one-rank-still-loading", meta=meta(gpu="NVIDIA A100 80GB PCIe", cc="8.0", tp=4), cmdline=SG4,
     log=sg_log("capture_begin", tp=4), stacks=stacks_all(4, lambda i: ALLREDUCE_SYNC if i < 3 else LOADER_MAIN),
     gpus=gpus(4, "NVIDIA A100 80GB PCIe", "8.0", util_by=[100, 100, 100, 0]))

case("collective-spin-all-gpus-busy", "fires", "dp2-tp1-all-spinning", meta=meta(gpu="NVIDIA H200", cc="9.0", tp=1),
     cmdline=SG2.replace("--tp 2", "--tp 1 --dp 2"), log=sg_log("capture_begin"),
     stacks=stacks_all(2, lambda i: [nat("cuCtxSynchronize", "libcuda.so.1")] + ALLREDUCE_SYNC, active=True),
     gpus=gpus(2, "NVIDIA H200", "9.0", util=100))
case("collective-spin-all-gpus-busy", "quiet", "one-rank-spinning-kernel", meta=meta(gpu="NVIDIA H200", cc="9.0", tp=1),
     cmdline=SG2.replace("--tp 2", "--tp 1"), log=sg_log("capture_begin"),
     stacks=stacks_all(1, lambda i: [nat("cuCtxSynchronize_v2", "libcuda.so.1")] + ALLREDUCE_SYNC[:1] + FORWARD, active=True),
     gpus=gpus(1, "NVIDIA H200", "9.0", util=100))

case("collective-hang-outlier", "fires", "three-wait-one-elsewhere", meta=meta(tp=4), cmdline=SG4, log=sg_log("capture_begin", tp=4),
     stacks=stacks_all(4, lambda i: BARRIER_CAPTURE if i != 2 else [fr("MoEGate.forward", "sglang/srt/models/deepseek_v2.py", 310)] + FORWARD))
case("collective-hang-outlier", "quiet", "all-ranks-alike", meta=meta(tp=4), cmdline=SG4, log=sg_log("capture_begin", tp=4),
     stacks=stacks_all(4, lambda i: BARRIER_CAPTURE))

# =================================================================== vllm.yaml

SHM = [v_line("No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).", "shm_broadcast.py:466", when=f"11-29 23:{12+k:02d}:00") for k in range(3)]
case("vllm-shm-broadcast-multigpu", "fires", "tp4-silent-workers", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4), cmdline=V4,
     log=v_log("load_end", tp=4, extra=SHM))
case("vllm-shm-broadcast-multigpu", "quiet", "custom-ar-already-off", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4),
     cmdline=V4 + " --disable-custom-all-reduce", log=v_log("load_end", tp=4, extra=SHM))
case("vllm-shm-broadcast-multigpu", "quiet", "single-gpu", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=1),
     cmdline="vllm serve /models/Qwen3-8B", log=v_log("load_end", tp=1, extra=SHM))

case("vllm-shm-broadcast-pcie", "fires", "l40s-tp2", meta=meta("vllm", gpu="NVIDIA L40S", cc="8.9", tp=2), cmdline=V2, log="\n".join(SHM) + "\n")
case("vllm-shm-broadcast-pcie", "quiet", "nvlink-h100", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2), cmdline=V2, log="\n".join(SHM) + "\n")

VFP8 = "vllm serve /models/Llama-3.3-70B-Instruct-FP8-dynamic --tensor-parallel-size 4"
case("vllm-shm-broadcast-compile-heavy", "fires", "fp8-model-tp4", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4), cmdline=VFP8,
     log="\n".join(SHM) + "\n")
case("vllm-shm-broadcast-compile-heavy", "quiet", "compilers-alive", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4), cmdline=VFP8,
     log="\n".join(SHM) + "\n", procs=procs(4, "vllm", compilers=2))

case("vllm-shm-broadcast-compiling", "fires", "nvcc-children", meta=meta("vllm", tp=4), cmdline=V4, log="\n".join(SHM) + "\n", procs=procs(4, "vllm", compilers=2))
case("vllm-shm-broadcast-compiling", "quiet", "no-compiler", meta=meta("vllm", tp=4), cmdline=V4, log="\n".join(SHM) + "\n", procs=procs(4, "vllm"))

TIMEOUT = ["(APIServer pid=1000) Traceback (most recent call last):",
           '(APIServer pid=1000)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 771, in _wait_for_engine_startup',
           "(APIServer pid=1000) TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight loading for large models. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S)."]
case("vllm-engine-timeout-deepgemm", "fires", "deepgemm-on", meta=meta("vllm", gpu="NVIDIA H200", cc="9.0", tp=8), env=env(VLLM_USE_DEEP_GEMM="1"),
     cmdline="vllm serve /models/DeepSeek-R1 --tensor-parallel-size 8", log=v_log("load_end", tp=2, extra=TIMEOUT))
case("vllm-engine-timeout-deepgemm", "quiet", "timeout-while-weights-crawl", meta=meta("vllm", gpu="NVIDIA H200", cc="9.0", tp=8), env=env(VLLM_USE_DEEP_GEMM="1"),
     log=v_log("load_begin", tp=2, extra=["Loading safetensors checkpoint shards:  38% Completed | 62/163 [10:01<16:20,  9.71s/it]"] + TIMEOUT))
case("vllm-engine-timeout-deepgemm", "quiet", "timeout-no-jit-signal", meta=meta("vllm", tp=2), log=v_log("load_end", compile=False, extra=TIMEOUT))

case("vllm-profile-run-silent", "fires", "loaded-no-kv-line", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B --enforce-eager",
     log=v_log("load_end", tp=1, compile=False))
case("vllm-profile-run-silent", "quiet", "kv-sized", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B --enforce-eager",
     log=v_log("kv", tp=1, compile=False))

# =================================================================== weights.yaml

OLD_BAR = [f"Loading safetensors checkpoint shards:  {p}% Completed | {n}/30 [{m:02d}:00<{30-m:02d}:00, 41.20s/it]" for n, p, m in ((3, 10, 2), (5, 17, 3), (7, 23, 5))]
case("weight-bar-crawling", "fires", "sglang-0.5.9-bar", meta=meta(tp=2, version="0.5.9"), cmdline=SG2, log=sg_log("load_begin", old=True, extra=OLD_BAR))
case("weight-bar-crawling", "fires", "vllm-bar", meta=meta("vllm", tp=2), cmdline=V2,
     log=v_log("load_begin", extra=[f"(EngineCore_DP0 pid=2000) Loading safetensors checkpoint shards:  {p}% Completed | {n}/61 [0{n}:00<20:00, 58.1s/it]" for n, p in ((2, 3), (4, 7))]))
case("weight-bar-crawling", "quiet", "bar-finished", meta=meta(tp=2, version="0.5.9"), cmdline=SG2, log=sg_log("load_end", old=True))

case("weight-load-stack", "fires", "threads-in-loader", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("load_begin", tp=1), stacks={"TP0": rank_stack(0, LOADER_MAIN, tp=1, extra=(LOADER_WORKER,))})
case("weight-load-stack", "quiet", "in-kv-pool", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("load_end", tp=1), stacks={"TP0": rank_stack(0, [fr("MHATokenToKVPool._create_buffers", "sglang/srt/mem_cache/memory_pool.py", 2451)] + KV, tp=1)})

OPEN_MAIN = [fr("Condition.wait", "threading.py", 327), fr("Event.wait", "threading.py", 629), fr("Thread.start", "threading.py", 969),
             fr("ThreadPoolExecutor._adjust_thread_count", "concurrent/futures/thread.py", 199),
             fr("ThreadPoolExecutor.submit", "concurrent/futures/thread.py", 176),
             fr("buffered_multi_thread_safetensors_weights_iterator", "sglang/srt/model_loader/weight_utils.py", 1367)] + LOAD
case("weight-load-no-progress", "fires", "loader-quiet-60s", meta=meta(tp=1, since_last_progress_s=60.0),
     cmdline="python3 -m sglang.launch_server --model-path /mnt/models/Qwen3-8B", log=sg_log("load_begin", tp=1),
     stacks={"TP0": rank_stack(0, LOADER_MAIN, tp=1, extra=(LOADER_WORKER,))})
case("weight-load-no-progress", "quiet", "loader-reading", meta=meta(tp=1, since_last_progress_s=2.0),
     cmdline="python3 -m sglang.launch_server --model-path /mnt/models/Qwen3-8B", log=sg_log("load_begin", tp=1),
     stacks={"TP0": rank_stack(0, LOADER_MAIN, tp=1, extra=(LOADER_WORKER,))})
case("weight-load-frozen-open", "fires", "worker-thread-in-open", meta=meta(tp=1, since_last_progress_s=420.0),
     cmdline="python3 -m sglang.launch_server --model-path /mnt/models/Qwen3-8B", log=sg_log("load_begin", tp=1),
     stacks={"TP0": rank_stack(0, OPEN_MAIN, tp=1, extra=(LOADER_WORKER_OPEN,))})
case("weight-load-frozen-open", "fires", "loader-thread-waits-for-fifo-writer", meta=meta(tp=1, since_last_progress_s=30.0),
     cmdline="python3 -m sglang.launch_server --model-path /mnt/models/Qwen3-8B", log=sg_log("load_begin", tp=1),
     stacks={"TP0": rank_stack(0, LOADER_MAIN, tp=1, extra=(LOADER_WORKER,))},
     procs=[{**p, "wchan": ["do_select", "wait_for_partner"]} if p["role"] == "scheduler" else p for p in procs(1)])
case("weight-load-frozen-open", "quiet", "reading-tensors-running", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("load_begin", tp=1), stacks={"TP0": rank_stack(0, LOADER_MAIN, tp=1, extra=(LOADER_WORKER,))}, procs=procs(1, states={"scheduler": "R"}))

case("weight-load-rank-behind", "fires", "tp3-still-reading", meta=meta(tp=4), cmdline=SG4,
     log=sg_log("load_begin", tp=4, extra=[f"[2026-11-29 23:01:0{i} TP{i}] Load weight end. elapsed=41.1{i} s, type=LlamaForCausalLM, avail mem=100.5 GB, mem usage=35.2 GB." for i in range(3)]),
     stacks=stacks_all(4, lambda i: BARRIER_AFTER_LOAD if i < 3 else LOADER_MAIN))
case("weight-load-rank-behind", "quiet", "all-ranks-reading", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4),
     stacks=stacks_all(4, lambda i: LOADER_MAIN))

case("weight-load-peer-behind", "fires", "node0-waits-for-node1", meta=meta(tp=2, nnodes=2, since_last_progress_s=45.0),
     cmdline=SG2 + " --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000",
     log=sg_log("load_end", tp=1), stacks={"TP0": rank_stack(0, BARRIER_AFTER_LOAD, tp=2)})
case("weight-load-peer-behind", "quiet", "one-rank-still-reading-here", meta=meta(tp=2),
     cmdline=SG2, log=sg_log("load_begin"), stacks=stacks_all(2, lambda i: BARRIER_AFTER_LOAD if i == 0 else LOADER_MAIN))
case("weight-load-d-state", "fires", "schedulers-in-D", meta=meta(tp=2), cmdline=SG2,
     log=sg_log("load_begin", extra=["Multi-thread loading shards:  12% Completed | 2/17 [04:10<29:10, 125.0s/it]"]), procs=procs(2, states={"scheduler": "D"}))
case("weight-load-d-state", "quiet", "D-after-weights", meta=meta(tp=2), cmdline=SG2, log=sg_log("kv"), procs=procs(2, states={"scheduler": "D"}))

case("weight-load-begin-silent", "fires", "no-bar-yet", meta=meta(tp=2), cmdline=SG2, log=sg_log("load_begin"))
case("weight-load-begin-silent", "quiet", "bar-moving", meta=meta(tp=2), cmdline=SG2,
     log=sg_log("load_begin", extra=["Multi-thread loading shards:  41% Completed | 7/17 [00:30<00:43,  4.3s/it]"]))

case("weight-network-storage-prior", "fires", "nfs-model-path", meta=meta(tp=2), cmdline="python3 -m sglang.launch_server --model-path /mnt/nfs/models/Qwen3-32B --tp 2")
case("weight-network-storage-prior", "quiet", "local-model-path", meta=meta(tp=2), cmdline="python3 -m sglang.launch_server --model-path /data/models/Qwen3-32B --tp 2")

# =================================================================== memory.yaml

KV_STACK = [fr("MHATokenToKVPool._create_buffers_normal.<locals>._zeros", "sglang/srt/mem_cache/memory_pool.py", 2626),
            fr("MHATokenToKVPool._create_buffers", "sglang/srt/mem_cache/memory_pool.py", 2451),
            fr("MHATokenToKVPool.__init__", "sglang/srt/mem_cache/memory_pool.py", 2293),
            fr("KVCacheConfigurator._build_mha_kv_pool", "sglang/srt/mem_cache/kv_cache_configurator.py", 2775),
            fr("KVCacheConfigurator._build_token_to_kv_pool", "sglang/srt/mem_cache/kv_cache_configurator.py", 1915)] + KV
case("kv-pool-stack", "fires", "in-pool-constructor", meta=meta(tp=2), cmdline=SG2, log=sg_log("load_end"), stacks=stacks_all(2, lambda i: KV_STACK, active=True))
case("kv-pool-stack", "quiet", "in-capture", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), stacks=stacks_all(2, lambda i: CAPTURE_ONE))

case("kv-silent-after-weights", "fires", "h100-tp2", meta=meta(gpu="NVIDIA H100 80GB HBM3", tp=2), cmdline=SG2, log=sg_log("load_end"))
case("kv-silent-after-weights", "quiet", "kv-allocated", meta=meta(gpu="NVIDIA H100 80GB HBM3", tp=2), cmdline=SG2, log=sg_log("kv"))

HC = "python3 -m sglang.launch_server --model-path /models/Qwen3-235B-A22B --tp 8 --enable-hierarchical-cache --hicache-size 200"
case("kv-host-pool", "fires", "hicache-after-weights", meta=meta(tp=8), cmdline=HC, log=sg_log("load_end", tp=2))
case("kv-host-pool", "quiet", "hicache-started", meta=meta(tp=8), cmdline=HC, log=sg_log("ready", tp=2))

case("kv-host-pool-prior", "fires", "hicache-meta-only", meta=meta(tp=8), cmdline=HC)
case("kv-host-pool-prior", "quiet", "no-host-pool", meta=meta(tp=8), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-235B-A22B --tp 8 --mem-fraction-static 0.8")

case("kv-mem-fraction-oversize", "fires", "fraction-0.97", meta=meta(tp=2), cmdline=SG2 + " --mem-fraction-static 0.97")
case("kv-mem-fraction-oversize", "quiet", "fraction-0.85", meta=meta(tp=2), cmdline=SG2 + " --mem-fraction-static 0.85")

case("kv-mem-fraction-oversize-log", "fires", "fraction-0.95-no-pool", meta=meta(tp=2), cmdline=SG2 + " --mem-fraction-static 0.95", log=sg_log("load_end"))
case("kv-mem-fraction-oversize-log", "quiet", "fraction-0.95-pool-done", meta=meta(tp=2), cmdline=SG2 + " --mem-fraction-static 0.95", log=sg_log("kv"))

case("shm-nccl-errors", "fires", "posix-fallocate", meta=meta("vllm", tp=2), cmdline=V2, env=env(NCCL_DEBUG="WARN"),
     log=v_log("load_end", extra=["pod-7f9:2100:2311 [0] include/alloc.h:125 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-3XqGzA (size 9637888)",
                                  "pod-7f9:2100:2311 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device"]))
case("shm-nccl-errors", "quiet", "shm-transport-healthy", meta=meta("vllm", tp=2), cmdline=V2, env=env(NCCL_DEBUG="INFO"),
     log=v_log("dist", extra=["pod-7f9:2100:2311 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
                              "pod-7f9:2100:2311 [0] NCCL INFO ncclCommInitRank comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE"]))

case("shm-bus-error", "fires", "worker-sigbus", meta=meta("vllm", tp=4), cmdline=V4,
     log=v_log("load_end", tp=4, extra=["Fatal Python error: Bus error", "", "Thread 0x00007f1c2d7fe640 (most recent call first):",
                                        '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/shm_broadcast.py", line 310 in acquire_write']))
case("shm-bus-error", "quiet", "sigbus-with-xid", meta=meta("vllm", tp=4), cmdline=V4, log=v_log("load_end", tp=4, extra=["Bus error (core dumped)"]),
     dmesg="[91234.1] NVRM: Xid (PCI:0000:4e:00): 79, pid=4201, name=VLLM::Worker_TP1, GPU has fallen off the bus.\n")

# =================================================================== jit.yaml

case("jit-compiler-children", "fires", "nvcc-under-rank", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), procs=procs(2, compilers=2))
case("jit-compiler-children", "quiet", "no-compiler", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), procs=procs(2))

DG_LINES = ["[2026-11-29 23:01:40 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`. It is recommended to run `sglang.compile_deep_gemm` with same args as `sglang.launch_server` for pre-compilation to reduce the overhead if you have not run it before. For example: `python3 -m sglang.compile_deep_gemm --model deepseek-ai/DeepSeek-V3 --tp 8 --trust-remote-code`",
            "[2026-11-29 23:01:40 TP0] Try DeepGEMM JIT Compiling for <GEMM_NT_F8F8BF16> N=24576, K=1536, num_groups=1 with all Ms. It only takes a little time (typically 1 sec) if you have run `python3 -m sglang.compile_deep_gemm`. ",
            "DeepGEMM warmup:  14%|█▍        | 2350/16384 [03:12<19:10, 12.2it/s]"]
case("jit-compile-log", "fires", "sglang-deepgemm", meta=meta(tp=8), cmdline="python3 -m sglang.launch_server --model-path /models/DeepSeek-V3 --tp 8 --trust-remote-code",
     log=sg_log("capture_begin", tp=2, extra=DG_LINES))
case("jit-compile-log", "fires", "vllm-dynamo", meta=meta("vllm", tp=2), cmdline=V2, log=v_log("compile_begin"))
case("jit-compile-log", "quiet", "vllm-compile-done", meta=meta("vllm", tp=2), cmdline=V2, log=v_log("compile_end"))

case("jit-compile-stack", "fires", "flashinfer-ninja-h100", meta=meta(gpu="NVIDIA H100 80GB HBM3", tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("capture_begin", tp=1), stacks={"TP0": rank_stack(0, FI_BUILD, tp=1)})
case("jit-compile-stack", "quiet", "waiting-on-lock", meta=meta(gpu="NVIDIA H100 80GB HBM3", tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("capture_begin", tp=1), stacks={"TP0": rank_stack(0, FI_LOCK, tp=1)})

case("jit-outlier-rank-compiles", "fires", "tp0-deepgemm-others-barrier", meta=meta(tp=4), cmdline=SG4, log=sg_log("capture_begin", tp=4),
     stacks=stacks_all(4, lambda i: DEEPGEMM_TP0 if i == 0 else BARRIER_CAPTURE))
case("jit-outlier-rank-compiles", "quiet", "all-barrier", meta=meta(tp=4), cmdline=SG4, log=sg_log("capture_begin", tp=4), stacks=stacks_all(4, lambda i: BARRIER_CAPTURE))

case("jit-torch-compile-capture", "fires", "torch-compile-in-capture", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --enable-torch-compile",
     log=sg_log("capture_begin", tp=1))
case("jit-torch-compile-capture", "quiet", "no-torch-compile", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("capture_begin", tp=1))

case("jit-deepgemm-hopper-prior", "fires", "h200-tp8-meta", meta=meta(gpu="NVIDIA H200", cc="9.0", tp=8))
case("jit-deepgemm-hopper-prior", "quiet", "h200-tp2-meta", meta=meta(gpu="NVIDIA H200", cc="9.0", tp=2))
case("jit-deepgemm-hopper-prior", "quiet", "vllm-engine", meta=meta("vllm", gpu="NVIDIA H200", cc="9.0", tp=8))

case("jit-quantized-model-prior", "fires", "fp8-model-name", meta=meta("vllm", gpu="NVIDIA H100 NVL", cc="9.0", tp=1), cmdline="vllm serve /models/Mistral-Small-24B-Instruct-FP8")
case("jit-quantized-model-prior", "quiet", "bf16-model", meta=meta("vllm", gpu="NVIDIA H100 NVL", cc="9.0", tp=1), cmdline="vllm serve /models/Mistral-Small-24B-Instruct")

case("jit-lock-wait", "fires", "flashinfer-filelock", meta=meta(gpu="NVIDIA H100 80GB HBM3", tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("capture_begin", tp=1), stacks={"TP0": rank_stack(0, FI_LOCK, tp=1)}, procs=procs(1))
case("jit-lock-wait", "quiet", "lock-but-compiler-running", meta=meta(gpu="NVIDIA H100 80GB HBM3", tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("capture_begin", tp=1), stacks={"TP0": rank_stack(0, FI_LOCK, tp=1)}, procs=procs(1, compilers=1))

case("jit-lock-log", "fires", "filelock-debug", meta=meta(tp=1), env=env(FLASHINFER_LOGGING_LEVEL="DEBUG"),
     log=sg_log("capture_begin", tp=1, extra=["Lock 139822 not acquired on /root/.cache/flashinfer/0.4.1/90a/cached_ops/tmp/batch_prefill_with_kv_cache.lock, waiting 0.05 seconds ..." for _ in range(3)]))
case("jit-lock-log", "quiet", "lock-acquired-released", meta=meta(tp=1), env=env(FLASHINFER_LOGGING_LEVEL="DEBUG"),
     log=sg_log("capture_begin", tp=1, extra=["Lock 139822 acquired on /root/.cache/flashinfer/0.4.1/90a/cached_ops/tmp/batch_prefill_with_kv_cache.lock",
                                               "Lock 139822 released on /root/.cache/flashinfer/0.4.1/90a/cached_ops/tmp/batch_prefill_with_kv_cache.lock"]))

case("jit-cache-on-network-fs-prior", "fires", "flashinfer-cache-on-nfs", meta=meta(tp=4), cmdline=SG4, env=env(FLASHINFER_WORKSPACE_BASE="/nfs/team/cache", HF_HOME="/nfs/team/hf"))
case("jit-cache-on-network-fs-prior", "quiet", "cache-on-local-disk", meta=meta(tp=4), cmdline=SG4, env=env(FLASHINFER_WORKSPACE_BASE="/local_nvme/cache", HF_HOME="/nfs/team/hf"))

AT_COMMON = [fr("AutoTuner.choose_one", "flashinfer/autotuner.py", 512), fr("trtllm_fp4_block_scale_moe", "flashinfer/fused_moe/core.py", 1840),
             fr("FlashInferFP4MoE.forward", "sglang/srt/layers/moe/fused_moe_triton/layer.py", 1204)] + FORWARD
def at_rank(i):
    if i == 3:
        return [fr("AutoTuner._profile_single_kernel", "flashinfer/autotuner.py", 640)] + AT_COMMON
    return [fr("all_reduce", "torch/distributed/distributed_c10d.py", 3252), fr("AutoTuner._sync_tactics", "flashinfer/autotuner.py", 701)] + AT_COMMON
case("autotune-ranks-desync", "fires", "tp3-profiling-others-sync", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=4), cmdline=SG4, log=sg_log("capture_begin", tp=4),
     stacks=stacks_all(4, at_rank))
case("autotune-ranks-desync", "quiet", "all-profiling-together", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=4), cmdline=SG4, log=sg_log("capture_begin", tp=4),
     stacks=stacks_all(4, lambda i: at_rank(3)))

case("autotune-log-split", "fires", "one-rank-cache-hit", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=2), cmdline=SG2,
     log=sg_log("kv", extra=["[2026-11-29 23:01:00 TP0] Running FlashInfer autotune with cache: /root/.cache/sglang/flashinfer_autotune.json",
                             "[2026-11-29 23:01:00 TP1] Loaded autotune cache from /root/.cache/sglang/flashinfer_autotune.json (cache hit), skipping tuning",
                             "[2026-11-29 23:01:01 TP1] FlashInfer autotune completed."]))
case("autotune-log-split", "quiet", "both-ranks-tuned", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=2), cmdline=SG2,
     log=sg_log("kv", extra=[f"[2026-11-29 23:01:00 TP{i}] Running FlashInfer autotune with cache: /root/.cache/sglang/flashinfer_autotune.json" for i in range(2)]
                + [f"[2026-11-29 23:01:40 TP{i}] FlashInfer autotune completed." for i in range(2)]))

# =================================================================== attention.yaml

PRO6K = dict(gpu="NVIDIA RTX PRO 6000 Blackwell Workstation Edition", cc="12.0")
R5090 = dict(gpu="NVIDIA GeForce RTX 5090", cc="12.0")
case("flashinfer-jit-on-new-arch", "fires", "pro6000-build-and-load", meta=meta(tp=1, **PRO6K), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("capture_begin", tp=1), stacks={"TP0": rank_stack(0, FI_BUILD, tp=1)})
case("flashinfer-jit-on-new-arch", "quiet", "h100-build-and-load", meta=meta(tp=1, gpu="NVIDIA H100 80GB HBM3", cc="9.0"),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B", log=sg_log("capture_begin", tp=1), stacks={"TP0": rank_stack(0, FI_BUILD, tp=1)})

case("flashinfer-sm120-selected", "fires", "sglang-flag-5090", meta=meta(tp=1, **R5090),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --attention-backend flashinfer", log=sg_log("load_end", tp=1))
case("flashinfer-sm120-selected", "fires", "vllm-env-pro6000", meta=meta("vllm", tp=1, **PRO6K), cmdline="vllm serve /models/Qwen3-8B",
     env=env(VLLM_ATTENTION_BACKEND="FLASHINFER"), log=v_log("load_end", tp=1, compile=False, backend="FlashInfer"))
case("flashinfer-sm120-selected", "quiet", "stuck-in-nccl-init", meta=meta(tp=2, **PRO6K),
     cmdline=SG2 + " --attention-backend flashinfer", log=sg_log("nccl"))
case("flashinfer-sm120-selected", "quiet", "triton-backend", meta=meta(tp=1, **R5090),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --attention-backend triton", log=sg_log("load_end", tp=1))

case("flashinfer-sm120-sglang-default", "fires", "default-flashinfer-after-pool", meta=meta(tp=1, **PRO6K),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("kv", tp=1, backend_line="Attention backend not specified. Use flashinfer backend by default."))
case("flashinfer-sm120-sglang-default", "quiet", "mla-model-triton-default", meta=meta(tp=1, **PRO6K),
     cmdline="python3 -m sglang.launch_server --model-path /models/DeepSeek-V2-Lite --trust-remote-code",
     log=sg_log("kv", tp=1, backend_line="Attention backend not specified. Use triton backend by default."))

case("flashinfer-arch-errors", "fires", "trtllm-gen-unsupported", meta=meta(tp=1, **PRO6K), cmdline="python3 -m sglang.launch_server --model-path /models/GLM-4.5-Air",
     log=sg_log("capture_begin", tp=1, extra=["[2026-11-29 23:01:10] Scheduler hit an exception: Traceback (most recent call last):",
                                               '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/prefill.py", line 3100, in trtllm_batch_context_with_kv_cache',
                                               "RuntimeError: Error in function 'TllmGenFmhaRunner' at /workspace/include/flashinfer/trtllm/fmha/fmhaRunner.cuh:30: Unsupported architecture"]))
case("flashinfer-arch-errors", "quiet", "h100-sgl-kernel-image", meta=meta(tp=1, gpu="NVIDIA H100 80GB HBM3", cc="9.0"),
     log=sg_log("load_end", tp=1, extra=["RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device"]))

case("flashinfer-sm120-configured-prior", "fires", "flag-on-pro6000", meta=meta(tp=1, **PRO6K),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --attention-backend flashinfer")
case("flashinfer-sm120-configured-prior", "fires", "flashinfer-env-5090", meta=meta("vllm", tp=1, **R5090), env=env(FLASHINFER_CUDA_ARCH_LIST="12.0"))
case("flashinfer-sm120-configured-prior", "quiet", "flag-on-h100", meta=meta(tp=1, gpu="NVIDIA H100 80GB HBM3", cc="9.0"),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --attention-backend flashinfer")

case("flashinfer-sm120-default-prior", "fires", "5090-single-gpu-meta", meta=meta("vllm", tp=1, **R5090))
case("flashinfer-sm120-default-prior", "quiet", "5090-tp2-meta", meta=meta("vllm", tp=2, **R5090))

case("arch-kernel-sampler-spin", "fires", "vllm-topk-topp-dummy-run", meta=meta("vllm", tp=1, **R5090), cmdline="vllm serve /models/Qwen2.5-7B-Instruct",
     log=v_log("load_end", tp=1, compile=False), stacks={"EngineCore": rank_stack(0, SAMPLER, engine="vllm", tp=1, active=True)},
     gpus=gpus(1, R5090["gpu"], "12.0", util=100))
case("arch-kernel-sampler-spin", "quiet", "sampler-behind-all-gather", meta=meta("vllm", tp=2, **R5090), cmdline=V2,
     stacks=stacks_all(2, lambda i: [fr("all_gather", "torch/distributed/distributed_c10d.py", 3700),
                                      fr("GroupCoordinator.all_gather", "vllm/distributed/parallel_state.py", 540),
                                      fr("LogitsProcessor._gather_logits", "vllm/model_executor/layers/logits_processor.py", 90)] + SAMPLER[1:], engine="vllm"))

FWD_SYNC = [fr("synchronize", "torch/cuda/__init__.py", 1083),
            fr("GPUModelRunner._dummy_run", "vllm/v1/worker/gpu_model_runner.py", 3120)] + V_PROFILE
case("arch-kernel-forward-spin", "fires", "single-gpu-dummy-run-spins", meta=meta("vllm", tp=1, gpu="NVIDIA GB10", cc="12.1"), cmdline="vllm serve /models/gpt-oss-20b",
     stacks={"EngineCore": rank_stack(0, FWD_SYNC, engine="vllm", tp=1, active=True)}, gpus=gpus(1, "NVIDIA GB10", "12.1", util=100))
case("arch-kernel-forward-spin", "quiet", "tp2-waiting-in-allreduce", meta=meta("vllm", tp=2), cmdline=V2,
     stacks=stacks_all(2, lambda i: V_ALLREDUCE_WARM, engine="vllm", active=True), gpus=gpus(2, util=100))

# =================================================================== graphs.yaml

GRAPH_EXIT = [fr("CUDAGraph.capture_end", "torch/cuda/graphs.py", 96), fr("graph.__exit__", "torch/cuda/graphs.py", 186)] + CAPTURE_ONE
case("cuda-graph-capture-stack", "fires", "capture-end-blocks", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), stacks=stacks_all(2, lambda i: GRAPH_EXIT))
case("cuda-graph-capture-stack", "quiet", "custom-ar-registration", meta=meta("vllm", tp=2), cmdline=V2, log=v_log("kv"),
     stacks=stacks_all(2, lambda i: CA_REGISTER, engine="vllm"))

case("cuda-graph-capture-log", "fires", "sglang-0.5.23", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"))
case("cuda-graph-capture-log", "fires", "sglang-0.4.6-style", meta=meta(tp=2, version="0.4.6.post5"), cmdline=SG2, log=sg_log("capture_begin", old=True))
case("cuda-graph-capture-log", "quiet", "capture-finished", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_end"))
case("cuda-graph-capture-log", "quiet", "deepgemm-inside-capture", meta=meta(tp=8), log=sg_log("capture_begin", tp=2, extra=DG_LINES))

case("cuda-graph-capture-error", "fires", "stream-capture-violation", meta=meta(tp=1), log=sg_log("capture_begin", tp=1, extra=[
    "[2026-11-29 23:01:20] Scheduler hit an exception: Traceback (most recent call last):",
    "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing"]))
case("cuda-graph-capture-error", "quiet", "healthy-capture", meta=meta(tp=1), log=sg_log("ready", tp=1))

# =================================================================== http.yaml

case("port-in-use-log", "fires", "uvicorn-bind-error", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --port 30000",
     log=sg_log("summary", tp=1, extra=["[2026-11-29 23:02:00] INFO:     Started server process [4100]",
                                         "[2026-11-29 23:02:00] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already in use"]))
case("port-in-use-log", "quiet", "bound-fine", meta=meta(tp=1), log=sg_log("ready", tp=1))

SS_OTHER = SS_HEADER + 'LISTEN 0      2048         0.0.0.0:30000      0.0.0.0:*    users:(("python3",pid=3999,fd=21))\n' \
    'LISTEN 0      4096       127.0.0.1:30005      0.0.0.0:*    users:(("sglang::schedul",pid=4200,fd=40))\n'
SS_OURS = SS_HEADER + 'LISTEN 0      2048         0.0.0.0:30000      0.0.0.0:*    users:(("python3",pid=4100,fd=21))\n'
case("port-conflict-live", "fires", "orphan-holds-30000", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --port 30000",
     log=sg_log("summary", tp=1), procs=procs(1), ports=SS_OTHER)
case("port-conflict-live", "quiet", "launcher-holds-port", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --port 30000",
     log=sg_log("uvicorn", tp=1), procs=procs(1), ports=SS_OURS)

case("vllm-routes-without-startup", "fires", "routes-last", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B", log=v_log("routes", tp=1))
case("vllm-routes-without-startup", "quiet", "startup-complete", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B", log=v_log("uvicorn", tp=1))

case("warmup-uvicorn-no-ready", "fires", "generate-never-returns", meta=meta(tp=2), cmdline=SG2, log=sg_log("warmup_get"))
case("warmup-uvicorn-no-ready", "quiet", "fired-up", meta=meta(tp=2), cmdline=SG2, log=sg_log("ready"))
case("warmup-uvicorn-no-ready", "quiet", "warmup-skipped", meta=meta(tp=2), cmdline=SG2 + " --skip-server-warmup", log=sg_log("uvicorn"))

WARM_THREAD = thread([fr("socket.recv_into", "socket.py", 720), fr("HTTPResponse._read_status", "http/client.py", 292),
                      fr("HTTPResponse.begin", "http/client.py", 331), fr("HTTPConnection.getresponse", "http/client.py", 1428),
                      fr("HTTPConnectionPool._make_request", "urllib3/connectionpool.py", 534),
                      fr("HTTPConnectionPool.urlopen", "urllib3/connectionpool.py", 787), fr("HTTPAdapter.send", "requests/adapters.py", 667),
                      fr("Session.send", "requests/sessions.py", 703), fr("Session.request", "requests/sessions.py", 589),
                      fr("post", "requests/api.py", 115), fr("_execute_server_warmup", "sglang/srt/entrypoints/http_server.py", 2470),
                      fr("_wait_and_warmup", "sglang/srt/entrypoints/http_server.py", 2560), fr("Thread.run", "threading.py", 1010),
                      fr("Thread._bootstrap_inner", "threading.py", 1073), fr("Thread._bootstrap", "threading.py", 1030)],
                     name="Thread-2 (_wait_and_warmup)", tid=4190)
UVICORN_MAIN = [fr("Server.serve", "uvicorn/server.py", 70), fr("run", "uvicorn/main.py", 580),
                fr("_setup_and_run_http_server", "sglang/srt/entrypoints/http_server.py", 3010),
                fr("launch_server", "sglang/srt/entrypoints/http_server.py", 3188), fr("run_server", "sglang/launch_server.py", 67)]
case("warmup-thread-stack", "fires", "requests-post-blocked", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("warmup_get", tp=1), stacks={"4100": pyspy(4100, "python3 -m sglang.launch_server --model-path /models/Qwen3-8B", thread(UVICORN_MAIN, tid=4100), WARM_THREAD)},
     procs=procs(1))
case("warmup-thread-stack", "quiet", "launcher-waiting-schedulers", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("kv", tp=1), stacks={"4100": pyspy(4100, "python3 -m sglang.launch_server", thread(LAUNCHER_WAIT, tid=4100))}, procs=procs(1))

case("warmup-error-log", "fires", "warmup-timeout", meta=meta(tp=1), log=sg_log("warmup_get", tp=1, extra=[
    "[2026-11-29 23:12:00] Initialization failed. warmup error: Traceback (most recent call last):",
    "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=30000): Read timed out. (read timeout=600)"]))
case("warmup-error-log", "quiet", "ready", meta=meta(tp=1), log=sg_log("ready", tp=1))

case("warmup-host-or-proxy-prior", "fires", "empty-host", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --host '' --port 30000")
case("warmup-host-or-proxy-prior", "fires", "proxy-without-no-proxy", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     env=env(https_proxy="http://proxy.corp.example:3128", http_proxy="http://proxy.corp.example:3128"))
case("warmup-host-or-proxy-prior", "quiet", "proxy-with-no-proxy", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --host 0.0.0.0",
     env=env(https_proxy="http://proxy.corp.example:3128", NO_PROXY="localhost,127.0.0.1"))

# =================================================================== processes.yaml

case("dead-rank-proc", "fires", "tp3-killed", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4), procs=procs(4, dead=["TP3"]),
     stacks=stacks_all(3, lambda i: BARRIER_AFTER_LOAD))
case("dead-rank-proc", "quiet", "all-alive", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4), procs=procs(4))

case("dead-rank-log", "fires", "sglang-launcher-notice", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4, extra=[
    "[2026-11-29 23:04:00] Rank 2 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."]))
case("dead-rank-log", "fires", "vllm-worker-died", meta=meta("vllm", tp=4), cmdline=V4, log=v_log("load_begin", tp=4, extra=[
    v_line("Worker proc VllmWorker-2 died unexpectedly, shutting down executor.", "multiproc_executor.py:149", level="ERROR")]))
case("dead-rank-log", "quiet", "healthy", meta=meta(tp=4), cmdline=SG4, log=sg_log("ready", tp=4))

case("dead-rank-oom-dmesg", "fires", "oom-killed-scheduler", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4),
     dmesg="[102311.2] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0\n"
           "[102311.9] Out of memory: Killed process 4203 (sglang::schedul) total-vm:512334012kB, anon-rss:120443212kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:245312kB oom_score_adj:0\n")
case("dead-rank-oom-dmesg", "quiet", "oom-other-process", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_begin", tp=4),
     dmesg="[102311.9] Out of memory: Killed process 812 (node) total-vm:1233012kB, anon-rss:803212kB, file-rss:0kB, shmem-rss:0kB, UID:1000\n")

TOK_MAIN = [fr("SSLSocket.recv_into", "ssl.py", 1251), fr("socket.readinto", "socket.py", 720),
            fr("HTTPConnectionPool.urlopen", "urllib3/connectionpool.py", 787), fr("Session.send", "requests/sessions.py", 703),
            fr("_request_wrapper", "huggingface_hub/file_download.py", 302), fr("hf_hub_download", "huggingface_hub/file_download.py", 1010),
            fr("cached_files", "transformers/utils/hub.py", 470),
            fr("AutoTokenizer.from_pretrained", "transformers/models/auto/tokenization_auto.py", 1032),
            fr("get_tokenizer", "sglang/srt/utils/hf_transformers_utils.py", 450),
            fr("TokenizerManager.__init__", "sglang/srt/managers/tokenizer_manager.py", 260),
            fr("init_tokenizer_manager", "sglang/srt/entrypoints/engine.py", 1100),
            fr("Engine._launch_subprocesses", "sglang/srt/entrypoints/engine.py", 1320),
            fr("launch_server", "sglang/srt/entrypoints/http_server.py", 3156), fr("run_server", "sglang/launch_server.py", 67)]
case("tokenizer-stack-from-pretrained", "fires", "launcher-fetching-tokenizer", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct",
     log=sg_log("init_begin", tp=1), stacks={"4100": pyspy(4100, "python3 -m sglang.launch_server", thread(TOK_MAIN, tid=4100))}, procs=procs(1))
case("tokenizer-stack-from-pretrained", "quiet", "launcher-waits-schedulers", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct",
     log=sg_log("load_end", tp=1), stacks={"4100": pyspy(4100, "python3 -m sglang.launch_server", thread(LAUNCHER_WAIT, tid=4100))}, procs=procs(1))

case("tokenizer-slow-conversion-log", "fires", "hub-rate-limited", meta=meta("vllm", tp=1), cmdline="vllm serve meta-llama/Llama-3.1-8B-Instruct",
     log=v_log("header", tp=1, extra=["(APIServer pid=1000) WARNING 11-29 23:00:05 [tokenizer.py:230] 429 Client Error: Too Many Requests for url: https://huggingface.co/api/models/meta-llama/Llama-3.1-8B-Instruct/tree/main, retrying in 8s"]))
case("tokenizer-slow-conversion-log", "quiet", "healthy", meta=meta("vllm", tp=1), log=v_log("uvicorn", tp=1))

case("detokenizer-dead", "fires", "detokenizer-exited", meta=meta(tp=2), cmdline=SG2, log=sg_log("kv"), procs=procs(2, tokenizer_dead=True))
case("detokenizer-dead", "quiet", "detokenizer-alive", meta=meta(tp=2), cmdline=SG2, log=sg_log("kv"), procs=procs(2))

case("cpu-thread-oversubscription", "fires", "512-threads-no-omp", meta=meta(tp=8), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-235B-A22B --tp 8",
     env=env(CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7", NCCL_DEBUG="WARN"), log=sg_log("load_begin", tp=2), procs=procs(2, threads=612))
case("cpu-thread-oversubscription", "quiet", "omp-set", meta=meta(tp=8), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-235B-A22B --tp 8",
     env=env(OMP_NUM_THREADS="8"), log=sg_log("load_begin", tp=2), procs=procs(2, threads=612))

case("cpu-thread-errors-log", "fires", "libgomp-failed", meta=meta(tp=8), log=sg_log("load_begin", tp=2, extra=["libgomp: Thread creation failed: Resource temporarily unavailable"]))
case("cpu-thread-errors-log", "quiet", "healthy", meta=meta(tp=2), log=sg_log("ready"))

# =================================================================== driver.yaml

case("driver-xid-dmesg", "fires", "xid-79", meta=meta("vllm", tp=4), cmdline=V4, log=v_log("load_end", tp=4),
     dmesg="[345612.1] NVRM: GPU at PCI:0000:c1:00: GPU-5f0a1b2c-7d3e-4f50-9a61-0b1c2d3e4f50\n[345612.1] NVRM: Xid (PCI:0000:c1:00): 79, pid=4202, name=VLLM::Worker_TP2, GPU has fallen off the bus.\n")
case("driver-xid-dmesg", "quiet", "benign", meta=meta("vllm", tp=4), cmdline=V4, log=v_log("load_end", tp=4),
     dmesg="[    5.400000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15\n[    6.100000] nvidia-uvm: Loaded the UVM driver, major device number 509.\n")

case("driver-xid-in-log", "fires", "gpu-lost", meta=meta("vllm", tp=1), log=v_log("header", tp=1, extra=[
    "(EngineCore_DP0 pid=2000) ERROR 11-29 23:00:20 [core.py:700] RuntimeError: Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU"]))
case("driver-xid-in-log", "quiet", "healthy", meta=meta("vllm", tp=1), log=v_log("uvicorn", tp=1))

case("driver-kernel-stack", "fires", "rank-in-nvidia-module", meta=meta("vllm", tp=1), procs=procs(1, "vllm", states={"engine_core": "D"}),
     stacks={"2000": "$ cat /proc/2000/stack\n[<0>] os_acquire_spinlock+0x12/0x30 [nvidia]\n[<0>] _nv044077rm+0x5a/0x90 [nvidia]\n"
                     "[<0>] rm_ioctl+0x64/0xe0 [nvidia]\n[<0>] nvidia_ioctl+0x5e0/0x8d0 [nvidia]\n[<0>] __x64_sys_ioctl+0x95/0xd0\n[<0>] do_syscall_64+0x5b/0x110\n"})
case("driver-kernel-stack", "quiet", "ordinary-sleep", meta=meta("vllm", tp=1), procs=procs(1, "vllm"),
     stacks={"2000": "$ cat /proc/2000/stack\n[<0>] futex_wait_queue+0x63/0x90\n[<0>] futex_wait+0x185/0x270\n[<0>] do_futex+0x106/0x1b0\n"
                     "[<0>] __x64_sys_futex+0x8e/0x1d0\n[<0>] do_syscall_64+0x5b/0x110\n"})

case("driver-d-state-after-load", "fires", "d-state-in-capture", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), procs=procs(2, states={"TP1": "D"}))
case("driver-d-state-after-load", "quiet", "d-state-while-loading", meta=meta(tp=2), cmdline=SG2,
     log=sg_log("load_begin", extra=["Multi-thread loading shards:  12% Completed | 2/17 [04:10<29:10, 125.0s/it]"]), procs=procs(2, states={"TP1": "D"}))

# =================================================================== user_code.yaml

USER_HOOK = [fr("save", "numpy/lib/_npyio_impl.py", 580),
             fr("dump_layer", "/workspace/debug_hooks/hs_dump.py", 41),
             fr("HiddenStateDumper.__call__", "/workspace/debug_hooks/hs_dump.py", 77),
             fr("Qwen3Model.forward", "sglang/srt/models/qwen3.py", 330)] + FORWARD
case("user-code-in-rank-stack", "fires", "dump-hook-in-forward", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"),
     stacks=stacks_all(2, lambda i: USER_HOOK))
case("user-code-in-rank-stack", "quiet", "engine-only-frames", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), stacks=stacks_all(2, lambda i: FORWARD))

SAVE_FWD = [fr("_save", "torch/serialization.py", 1020), fr("save", "torch/serialization.py", 964),
            fr("save_hidden_states", "sglang/srt/models/qwen3.py", 300), fr("Qwen3Model.forward", "sglang/srt/models/qwen3.py", 345)] + FORWARD
case("user-hook-in-forward-stack", "fires", "torch-save-in-patched-forward", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"),
     stacks=stacks_all(2, lambda i: SAVE_FWD))
case("user-hook-in-forward-stack", "quiet", "plain-forward", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), stacks=stacks_all(2, lambda i: FORWARD))

HS = [f"[HS_DUMP] rank={r} layer=12 shape=(8, 4096) -> /data/hs/r{r}_l12_b8.pt" for r in range(2)]
case("user-markers-in-log", "fires", "dump-markers-during-capture", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin", extra=HS))
case("user-markers-in-log", "quiet", "markers-but-ready", meta=meta(tp=2), cmdline=SG2, log=sg_log("ready", extra=HS))

case("user-plugin-env-prior", "fires", "vllm-plugins", meta=meta("vllm", tp=1), env=env(VLLM_PLUGINS="acme_kv_plugin"))
case("user-plugin-env-prior", "quiet", "no-plugins", meta=meta("vllm", tp=1), env=env(VLLM_LOGGING_LEVEL="DEBUG"))

case("user-launch-wrapper-prior", "fires", "eval-harness", meta=meta("vllm", tp=1), cmdline="python run_eval.py --model /models/Qwen3-8B --backend vllm --tasks gsm8k")
case("user-launch-wrapper-prior", "quiet", "vllm-serve", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B")

# =================================================================== added in the second pass

case("nccl-p2p-broken-reported", "fires", "vllm-p2p-test-failed", meta=meta("vllm", gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=2), cmdline=V2,
     log=v_log("dist", extra=[v_line("Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.",
                                     "custom_all_reduce.py:137", "Worker_TP0", 4200, "WARNING")]))
case("nccl-p2p-broken-reported", "quiet", "p2p-already-disabled", meta=meta("vllm", gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=2), cmdline=V2, env=env(NCCL_P2P_DISABLE="1"),
     log=v_log("dist", extra=[v_line("Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed. To silence this warning, specify disable_custom_all_reduce=True explicitly.",
                                     "custom_all_reduce.py:137", "Worker_TP0", 4200, "WARNING")]))

case("custom-allreduce-p2p-check-last", "fires", "generating-p2p-cache", meta=meta("vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=4), cmdline=V4,
     log=v_log("dist", tp=4, extra=[v_line("generating GPU P2P access cache in /root/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3.json", "custom_all_reduce_utils.py:249", "Worker_TP0", 4200)]))
case("custom-allreduce-p2p-check-last", "quiet", "cache-read-then-loading", meta=meta("vllm", gpu="NVIDIA RTX A6000", cc="8.6", tp=4), cmdline=V4,
     log=v_log("dist", tp=4, extra=[v_line("reading GPU P2P access cache from /root/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3.json", "custom_all_reduce_utils.py:240", "Worker_TP0", 4200),
                                    v_line("Starting to load model /models/Llama-3.3-70B-Instruct...", "gpu_model_runner.py:2602", "Worker_TP0", 4200)]))

case("custom-allreduce-ipc-errors", "fires", "ipc-open-failed", meta=meta("vllm", tp=2), cmdline=V2,
     log=v_log("kv", extra=["(Worker_TP1 pid=4201) ERROR 11-29 23:05:00 [multiproc_executor.py:596] RuntimeError: CUDA error: invalid argument in cudaIpcOpenMemHandle (csrc/custom_all_reduce.cuh:354)"]))
case("custom-allreduce-ipc-errors", "quiet", "disabled-notice", meta=meta("vllm", tp=2), cmdline=V2 + " --disable-custom-all-reduce", log=v_log("kv"))
case("custom-allreduce-ipc-errors", "quiet", "sglang-fallback-warning", meta=meta(tp=2), cmdline=SG2,
     log=sg_log("load_end", extra=["[2026-11-29 23:01:09 TP0] Setup Custom allreduce failed with . To silence this warning, specify --disable-custom-all-reduce explicitly."]))

case("jit-compile-config-prior", "fires", "torch-compile-flag", meta=meta(tp=1, gpu="NVIDIA H100 80GB HBM3"), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --enable-torch-compile")
case("jit-compile-config-prior", "fires", "deepgemm-env", meta=meta("vllm", tp=8, gpu="NVIDIA H200"), cmdline="vllm serve /models/DeepSeek-R1 --tensor-parallel-size 8", env=env(VLLM_USE_DEEP_GEMM="1"))
case("jit-compile-config-prior", "quiet", "deepgemm-off", meta=meta("vllm", tp=8, gpu="NVIDIA H200"), cmdline="vllm serve /models/DeepSeek-R1 --tensor-parallel-size 8", env=env(VLLM_USE_DEEP_GEMM="0"))

case("jit-torch-extension-baton", "fires", "extensions-root-last", meta=meta("vllm", tp=1),
     log=v_log("load_end", tp=1, compile=False, extra=["Using /root/.cache/torch_extensions/py312_cu128 as PyTorch extensions root..."]))
case("jit-torch-extension-baton", "quiet", "extension-building", meta=meta("vllm", tp=1),
     log=v_log("load_end", tp=1, compile=False, extra=["Using /root/.cache/torch_extensions/py312_cu128 as PyTorch extensions root...",
                                                       "Emitting ninja build file /root/.cache/torch_extensions/py312_cu128/fused_adam/build.ninja...",
                                                       "Building extension module fused_adam..."]))

case("shm-small-container-flag", "fires", "docker-64m", meta=meta("vllm", tp=2),
     cmdline="docker run --gpus all --shm-size 64m -p 8000:8000 vllm/vllm-openai:latest --model /models/Qwen3-32B --tensor-parallel-size 2")
case("shm-small-container-flag", "quiet", "docker-16g", meta=meta("vllm", tp=2),
     cmdline="docker run --gpus all --shm-size 16g -p 8000:8000 vllm/vllm-openai:latest --model /models/Qwen3-32B --tensor-parallel-size 2")

case("nccl-p2p-pcie-init-last", "fires", "rtx5090-sglang-after-version", meta=meta(tp=2, **R5090), cmdline=SG2, log=sg_log("nccl"))
case("nccl-p2p-pcie-init-last", "quiet", "rtx5090-with-p2p-disabled", meta=meta(tp=2, **R5090), cmdline=SG2, env=env(NCCL_P2P_DISABLE="1"), log=sg_log("nccl"))
case("nccl-p2p-pcie-init-last", "quiet", "h100-after-version", meta=meta(tp=2, gpu="NVIDIA H100 80GB HBM3", cc="9.0"), cmdline=SG2, log=sg_log("nccl"))

EDITABLE = [l.replace(SITE + "sglang/", "/workspace/sglang/python/sglang/") for l in FORWARD]
case("user-code-in-rank-stack", "quiet", "editable-engine-checkout", meta=meta(tp=2), cmdline=SG2, log=sg_log("capture_begin"), stacks=stacks_all(2, lambda i: EDITABLE))
FI_SAMPLING = [fr("top_k_top_p_sampling_from_probs", "flashinfer/sampling.py", 800),
               fr("TopKTopPSampler.forward_cuda", "vllm/v1/sample/ops/topk_topp_sampler.py", 120),
               fr("Sampler.forward", "vllm/v1/sample/sampler.py", 95),
               fr("GPUModelRunner._dummy_sampler_run", "vllm/v1/worker/gpu_model_runner.py", 3243)] + V_PROFILE
case("flashinfer-jit-on-new-arch", "quiet", "flashinfer-sampler-kernel-5090", meta=meta("vllm", tp=1, **R5090), cmdline="vllm serve /models/Qwen2.5-7B-Instruct",
     stacks={"EngineCore": rank_stack(0, FI_SAMPLING, engine="vllm", tp=1, active=True)}, gpus=gpus(1, R5090["gpu"], "12.0", util=100))
case("arch-kernel-sampler-spin", "fires", "flashinfer-sampler-5090", meta=meta("vllm", tp=1, **R5090), cmdline="vllm serve /models/Qwen2.5-7B-Instruct",
     stacks={"EngineCore": rank_stack(0, FI_SAMPLING, engine="vllm", tp=1, active=True)}, gpus=gpus(1, R5090["gpu"], "12.0", util=100))

case("nccl-library-swapped-prior", "fires", "vllm-nccl-so-path", meta=meta("vllm", tp=4), cmdline=V4, env=env(VLLM_NCCL_SO_PATH="/opt/nccl/lib/libnccl.so.2"))
case("nccl-library-swapped-prior", "quiet", "default-nccl", meta=meta("vllm", tp=4), cmdline=V4, env=env(NCCL_DEBUG="WARN"))
case("weight-network-storage-prior", "fires", "vllm-download-dir-on-fsx", meta=meta("vllm", tp=2), cmdline="vllm serve Qwen/Qwen3-32B --download-dir /fsx/hf-cache --tensor-parallel-size 2")

# =================================================================== added from the GPU lab (docs/gpu.md)

# A KV pool allocated block by block after the weights: GPU memory keeps rising, the log is silent.
case("kv-pool-growing", "fires", "pool-rising-after-weights", meta=meta(tp=2, since_last_progress_s=0.9), cmdline=SG2,
     log=sg_log("load_end"), gpus=gpus(mem=(20000, 64000), samples=4))
case("kv-pool-growing", "fires", "pool-constructor-rising", meta=meta(tp=2, since_last_progress_s=0.5), cmdline=SG2,
     log=sg_log("load_end"), stacks=stacks_all(2, lambda i: KV_STACK, active=True), gpus=gpus(mem=(30000, 50000), samples=3))
case("kv-pool-growing", "quiet", "flat-after-weights", meta=meta(tp=2, since_last_progress_s=40.0), cmdline=SG2,
     log=sg_log("load_end"), gpus=gpus(mem=(64000, 64000), samples=4))
case("kv-pool-growing", "quiet", "rose-then-nothing-for-60s", meta=meta(tp=2, since_last_progress_s=60.0), cmdline=SG2,
     log=sg_log("load_end"), gpus=gpus(mem=(20000, 64000), samples=4))
case("kv-pool-growing", "quiet", "quiet-time-unknown", meta=meta(tp=2), cmdline=SG2,
     log=sg_log("load_end"), gpus=gpus(mem=(20000, 64000), samples=4))
case("kv-pool-growing", "quiet", "pool-allocated-capture-rising", meta=meta(tp=2, since_last_progress_s=0.5), cmdline=SG2,
     log=sg_log("capture_begin"), stacks=stacks_all(2, lambda i: CAPTURE_ONE), gpus=gpus(mem=(100000, 104000), samples=3))

# A script that embeds the engine: its launcher's stack is the user's script whatever happens; only
# a rank process in user code counts.
EMBED = "python3 /workspace/bench/offline_bench.py --model /models/Qwen3-32B --tp 2"
EMBED_LAUNCHER = [fr("_ConnectionBase.recv", "multiprocessing/connection.py", 250),
                  fr("Engine._launch_subprocesses", "sglang/srt/entrypoints/engine.py", 1350),
                  fr("Engine.__init__", "sglang/srt/entrypoints/engine.py", 140),
                  fr("main", "/workspace/bench/offline_bench.py", 88), fr("<module>", "/workspace/bench/offline_bench.py", 120)]
EMBED_PROCS = [{**p, "cmdline": EMBED} if p["role"] == "launcher" else p for p in procs(tp=2)]
case("user-code-in-rank-stack", "quiet", "embedding-script-launcher", meta=meta(tp=2), cmdline=EMBED, log=sg_log("capture_begin"),
     procs=EMBED_PROCS, stacks={"4100": pyspy(4100, EMBED, thread(EMBED_LAUNCHER, tid=4100)), **stacks_all(2, lambda i: FORWARD)})
# The GPU lab's collective: TP1 in a user post-load hook, TP0 in the all-reduce it skipped.
HOOK_WAIT = [fr("after_weights_loaded", "/workspace/hooks/user_hooks.py", 18),
             fr("ModelRunner.load_model", "sglang/srt/model_executor/model_runner.py", 1320)] + MODEL_RUNNER
ALLREDUCE_WAIT = [fr("synchronize", "torch/cuda/__init__.py", 1083),
                  fr("get_available_gpu_memory", "sglang/srt/utils/common.py", 540),
                  fr("ModelRunner.load_model", "sglang/srt/model_executor/model_runner.py", 1330)] + MODEL_RUNNER
case("user-code-in-rank-stack", "fires", "hook-on-one-rank-skips-collective", meta=meta(tp=2), cmdline=EMBED, log=sg_log("load_end"),
     procs=EMBED_PROCS, gpus=gpus(util_by=(100, 0)),
     stacks={"4100": pyspy(4100, EMBED, thread(EMBED_LAUNCHER, tid=4100)),
             **stacks_all(2, lambda i: HOOK_WAIT if i == 1 else ALLREDUCE_WAIT)})

# =================================================================== third pass: generalisation (probe corpus)

case("nccl-init-unique-id-timeout", "fires", "rank1-store-get-timeout", meta=meta("vllm", tp=2), cmdline=V2,
     log=v_log("header", extra=["torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout"]))
case("nccl-init-unique-id-timeout", "quiet", "multinode-same-error", meta=meta("vllm", tp=16, nnodes=2), cmdline=V2.replace("size 2", "size 16") + " --nnodes 2",
     log=v_log("header", extra=["torch.distributed.DistBackendError: [9] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout"]))

WATCHDOG_FIRST = ("[rank1]:[E1129 23:12:00.311820470 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
                  "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.")
case("nccl-p2p-first-collective-timeout", "fires", "a5000-first-allreduce", meta=meta("vllm", gpu="NVIDIA RTX A5000", cc="8.6", tp=2), cmdline=V2,
     log=v_log("load_end", extra=[WATCHDOG_FIRST]))
case("nccl-p2p-first-collective-timeout", "quiet", "h100-nvlink-same-timeout", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=2), cmdline=V2,
     log=v_log("load_end", extra=[WATCHDOG_FIRST]))
case("nccl-p2p-first-collective-timeout", "quiet", "late-collective", meta=meta("vllm", gpu="NVIDIA RTX A5000", cc="8.6", tp=2), cmdline=V2,
     log=v_log("load_end", extra=[WATCHDOG_FIRST.replace("SeqNum=1,", "SeqNum=5812,")]))

BARRIER_FAIL = ["[2026-11-29 23:20:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
                "RuntimeError: TP rank 0 could finish the model loading, but there are other ranks that didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or a slow node."]
case("weight-load-barrier-timeout-log", "fires", "tp0-barrier-timeout", meta=meta(tp=4), cmdline=SG4, log=sg_log("load_end", tp=4, extra=BARRIER_FAIL))
case("weight-load-barrier-timeout-log", "quiet", "slow-rank-was-killed", meta=meta(tp=4), cmdline=SG4,
     log=sg_log("load_end", tp=4, extra=["[2026-11-29 23:14:00] Rank 3 scheduler died during initialization (exit code: -9)."] + BARRIER_FAIL))

case("warmup-watchdog-timeout", "fires", "watchdog-after-uvicorn", meta=meta(tp=1),
     log=sg_log("warmup_get", tp=1, extra=["[2026-11-29 23:17:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"]))
case("warmup-watchdog-timeout", "fires", "sglang-0.4-watchdog", meta=meta(tp=1, version="0.4.6"),
     log=sg_log("warmup_get", tp=1, old=True, extra=["[23:17:00] Watchdog timeout (self.watchdog_timeout=300)"]))
case("warmup-watchdog-timeout", "quiet", "ready-then-watchdog", meta=meta(tp=1),
     log=sg_log("ready", tp=1, extra=["[2026-11-29 23:40:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)"]))

# widened forms of existing rules
case("dead-rank-log", "fires", "vllm-failed-core-proc-minus9", meta=meta("vllm", tp=1),
     log="(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}\n")
case("dead-rank-log", "fires", "sglang-0.4-child-failed", meta=meta(tp=4, version="0.4.0"),
     log=sg_log("load_begin", tp=4, old=True, extra=["[2026-11-29 23:13:40] Child process unexpectedly failed with exitcode=9. pid=48122"]))
case("flashinfer-arch-errors", "fires", "nvcc-unsupported-gpu-architecture", meta=meta("vllm", tp=1, **R5090),
     log="FAILED: batch_decode/batch_decode.cuda.o\nnvcc fatal   : Unsupported gpu architecture 'compute_120a'\nninja: build stopped: subcommand failed.\n")
case("flashinfer-arch-errors", "quiet", "nccl-build-without-kernels", meta=meta("vllm", tp=2, **R5090),
     log="ws:4410:4520 [0] enqueue.cc:1522 NCCL WARN Cuda failure 'no kernel image is available for execution on the device'\n")
case("nccl-build-lacks-arch", "fires", "nccl-no-kernel-image", meta=meta("vllm", gpu="NVIDIA B200", cc="10.0", tp=8),
     log="b200:4410:4520 [0] enqueue.cc:1522 NCCL WARN Cuda failure 'no kernel image is available for execution on the device'\n")
case("flashinfer-sm120-selected", "fires", "vllm-0.11-flashinfer-attention", meta=meta("vllm", tp=1, **R5090), cmdline="vllm serve /models/Qwen3-8B",
     log=v_line("Using FLASHINFER attention backend out of potential backends: ['FLASHINFER', 'TRITON_ATTN']", "cuda.py:403", "EngineCore_DP0", 311) + "\n"
         + v_line("Model loading took 15.2683 GiB and 16.001 seconds", "gpu_model_runner.py:2653", "EngineCore_DP0", 311) + "\n")
case("jit-compile-log", "fires", "vllm-deepgemm-warmup-bar", meta=meta("vllm", tp=8), env=env(VLLM_USE_DEEP_GEMM="1"),
     log=v_log("load_end", tp=8, compile=False, extra=["(Worker_TP0 pid=2231) INFO 11-29 23:06:00 [deep_gemm_warmup.py:160] DeepGemm(fp8_gemm_nt) warmup (W=torch.Size([7168, 2048])) :  12%|█▏        | 1003/8192 [04:11<29:51, 4.01it/s]"]))
case("jit-compile-log", "quiet", "jit-build-failed", meta=meta("vllm", tp=1, **R5090),
     log="2026-11-29 23:05:00,001 - INFO - flashinfer.jit: Loading JIT ops: batch_decode\nFAILED: batch_decode.cuda.o\nnvcc fatal   : Unsupported gpu architecture 'compute_120a'\nninja: build stopped: subcommand failed.\n")
case("jit-lock-log", "quiet", "hf-download-lock", meta=meta("vllm", tp=1),
     log="DEBUG 11-29 23:01:02 filelock: Lock 139912 not acquired on /root/.cache/huggingface/hub/.locks/models--Qwen--Qwen3-8B/1f5a.lock, waiting 0.05 seconds ...\n")
case("multinode-prior", "fires", "vllm-headless-secondary", meta=meta("vllm", tp=8, nnodes=None),
     cmdline="vllm serve /models/DeepSeek-V3 --tensor-parallel-size 8 --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-address 10.99.48.128 --headless")
case("multinode-prior", "fires", "sglang-node-rank-1", meta=meta(tp=16, nnodes=None),
     cmdline="python3 -m sglang.launch_server --model-path /models/DeepSeek-V3 --tp 16 --dist-init-addr 10.0.0.5:20000 --node-rank 1")
case("warmup-host-or-proxy-prior", "fires", "ipv6-wildcard-host", meta=meta(tp=1), cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --host :: --port 30000")
case("kv-host-pool", "fires", "host-pool-allocation-line-last", meta=meta(tp=8),
     log=sg_log("load_end", tp=8, extra=["[2026-11-29 23:10:25 TP0] Allocating 480.00 GB host memory for hierarchical KV cache."]))
case("driver-xid-in-log", "fires", "cuda-802-not-initialized", meta=meta("vllm", tp=8),
     log="RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized\n")
case("user-markers-in-log", "fires", "free-text-dump-print", meta=meta(tp=2), log=sg_log("capture_begin", extra=[">>> dumping layer 12 hidden states to /tmp/hs_dump/bs_1.pt"]))
case("shm-nccl-errors", "fires", "torch-mmap-cannot-allocate", meta=meta("vllm", tp=2),
     log="RuntimeError: unable to mmap 1048576 bytes from file </torch_231_1847710583_0>: Cannot allocate memory (12)\n")
case("port-in-use-log", "fires", "port-used-by-other-process", meta=meta(tp=1), log="ValueError: The port 30000 is already used by another process\n")
case("jit-compile-config-prior", "fires", "flashinfer-attention-on-hopper", meta=meta("vllm", tp=1, gpu="NVIDIA H100 80GB HBM3"), cmdline="vllm serve /models/Qwen3-8B",
     env=env(VLLM_ATTENTION_BACKEND="FLASHINFER"))
case("jit-compile-config-prior", "quiet", "flashinfer-attention-on-sm120", meta=meta("vllm", tp=1, **R5090), cmdline="vllm serve /models/Qwen3-8B",
     env=env(VLLM_ATTENTION_BACKEND="FLASHINFER"))

# =================================================================== blind-probe fixes (2026-11-30)

# an SM12x FlashInfer JIT that still has compilers alive is slow, not failed (jit_compile_slow)
case("flashinfer-sm120-selected", "quiet", "vllm-fp4-jit-compilers-alive", meta=meta("vllm", tp=1, **R5090), cmdline="vllm serve /models/Qwen3-8B",
     env=env(VLLM_ATTENTION_BACKEND="FLASHINFER"), log=v_log("load_end", tp=1, compile=False, backend="FlashInfer"),
     procs=procs(1, engine="vllm", compilers=2))
case("flashinfer-sm120-sglang-default", "quiet", "default-flashinfer-compilers-alive", meta=meta(tp=1, **PRO6K),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B",
     log=sg_log("kv", tp=1, backend_line="Attention backend not specified. Use flashinfer backend by default."), procs=procs(1, compilers=1))

# two ranks: no strict-minority outlier, but one waits in a per-tactic collective the other never enters
case("autotune-ranks-differ", "fires", "tp2-one-profiling-one-syncing", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=2), cmdline=SG2,
     log=sg_log("capture_begin", tp=2), stacks=stacks_all(2, lambda i: at_rank(3 if i == 0 else 0)))
case("autotune-ranks-differ", "quiet", "tp2-both-profiling", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=2), cmdline=SG2,
     log=sg_log("capture_begin", tp=2), stacks=stacks_all(2, lambda i: at_rank(3)))
case("autotune-ranks-differ", "quiet", "tp2-both-syncing", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=2), cmdline=SG2,
     log=sg_log("capture_begin", tp=2), stacks=stacks_all(2, lambda i: at_rank(0)))
case("autotune-ranks-differ", "quiet", "single-rank-profiling", meta=meta(gpu="NVIDIA B200", cc="10.0", tp=1),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B", log=sg_log("capture_begin", tp=1),
     stacks={"TP0": rank_stack(0, at_rank(3), tp=1)})

# OMP_NUM_THREADS set to a per-host value, times the ranks
case("cpu-omp-threads-times-ranks", "fires", "vllm-omp-224-tp8", meta=meta("vllm", tp=8), cmdline="vllm serve /models/Qwen3-235B-A22B --tensor-parallel-size 8",
     env=env(OMP_NUM_THREADS="224"), log=v_log("load_begin", tp=8))
case("cpu-omp-threads-times-ranks", "quiet", "omp-per-rank-small", meta=meta("vllm", tp=8), cmdline="vllm serve /models/Qwen3-235B-A22B --tensor-parallel-size 8",
     env=env(OMP_NUM_THREADS="8"), log=v_log("load_begin", tp=8))
case("cpu-omp-threads-times-ranks", "quiet", "single-rank", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B",
     env=env(OMP_NUM_THREADS="64"), log=v_log("load_begin", tp=1))
case("cpu-omp-threads-times-ranks", "quiet", "already-up", meta=meta("vllm", tp=8), cmdline="vllm serve /models/Qwen3-235B-A22B --tensor-parallel-size 8",
     env=env(OMP_NUM_THREADS="224"), log=v_log("ready", tp=8))


# ---------------------------------------------------------------- first failure (rules/failures.yaml)
# Written from what each layer prints when it fails (c10d, NCCL, CUDA runtime, ZMQ, uvicorn, gdb), in
# wordings of several releases; none copied from the dev corpus.

SG_TB = "[2026-11-29 23:02:0{s} TP{r}] "
BIND_TB = "\n".join([
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/tokenizer_manager.py", line 212, in __init__',
    "    self.recv_from_detokenizer = get_zmq_socket(context, zmq.PULL, port_args.tokenizer_ipc_name, True)",
    '  File "/usr/local/lib/python3.12/dist-packages/zmq/sugar/socket.py", line 311, in bind',
    "    super().bind(addr)",
])
case("first-failure-address-in-use", "fires", "c10d-store-eaddrinuse-then-children-killed", meta=meta(tp=2), cmdline=SG2,
     log="\n".join(["[2026-11-29 23:02:00 TP0] Init torch distributed begin.",
                    "[E1129 23:02:01.112 socket.cpp:957] [c10d] The server socket has failed to listen on any local network address. "
                    "port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
                    "[2026-11-29 23:02:02] Received sigquit from a child process. It usually means the child failed.",
                    "[2026-11-29 23:02:02] Rank 1 scheduler died during initialization (exit code: -9)."]))
case("first-failure-address-in-use", "fires", "zmq-bind", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B",
     log=BIND_TB + "\nzmq.error.ZMQError: Address already in use (addr='tcp://*:5557')\n")
case("first-failure-address-in-use", "quiet", "connection-refused-first", meta=meta(tp=1),
     log="[2026-11-29 23:02:01] ConnectionRefusedError: [Errno 111] Connection refused\n[2026-11-29 23:02:02] OSError: [Errno 98] Address already in use\n")

case("first-failure-bind-raised", "fires", "cut-at-zmq-bind", meta=meta("vllm", tp=4), log=BIND_TB + "\n")
case("first-failure-bind-raised", "quiet", "cut-in-model-load", meta=meta(tp=1), log="\n".join([
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_loader/loader.py", line 1063, in load_weights_only',
    "    model.load_weights(weights)"]))

case("first-failure-shared-memory", "fires", "torch-ncclsystemerror-last-error", meta=meta(tp=8),
     log="\n".join(["[rank3]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
                    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2",
                    "[rank3]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
                    "[rank3]: Last error:",
                    "[rank3]: Error while creating shared memory segment /dev/shm/nccl-Qa81Zc (size 9637888), error: No space left on device (28)"]))
case("first-failure-shared-memory", "fires", "torch-mmap-shm", meta=meta("vllm", tp=2),
     log="RuntimeError: unable to mmap 2097152 bytes from file </torch_88_3716528910_1>: Cannot allocate memory (12)\n")
case("first-failure-shared-memory", "quiet", "nccl-socket-error", meta=meta(tp=2),
     log="host:11:22 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<4312> failed : Software caused connection abort\n")

GDB_SHM = "\n".join([
    'Thread 412 "pt_main_thread" received signal SIGBUS, Bus error.',
    "#0  0x00007f2b1c2a4d10 in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) () from /usr/lib/x86_64-linux-gnu/libnccl.so.2",
    "#1  0x00007f2b1c2a31f2 in shmRecvProxyConnect () from /usr/lib/x86_64-linux-gnu/libnccl.so.2",
    "#2  0x00007f2b1c28d0a4 in ncclProxyService(void*) () from /usr/lib/x86_64-linux-gnu/libnccl.so.2",
    "#3  0x00007f2b5e7adb43 in start_thread () from /lib/x86_64-linux-gnu/libc.so.6", ""])
GDB_OTHER = GDB_SHM.replace("ncclShmOpen(char*, unsigned long, void**, void**, int, void**)", "ncclSocketAccept(ncclSocket*)").replace("shmRecvProxyConnect", "bootstrapRoot")
case("shm-bus-error-in-nccl-stack", "fires", "gdb-sigbus-in-shm-open", meta=meta(engine=None, tp=None), stacks={"reported": GDB_SHM})
case("shm-bus-error-in-nccl-stack", "quiet", "gdb-in-socket-accept", meta=meta(engine=None, tp=None), stacks={"reported": GDB_OTHER})

# a crash handler's backtrace (UCX, as Triton/HugeCTR print it): SIGBUS in a thread inside NCCL
UCX_SIGBUS_NCCL = """[node3:1 :0:381] Caught signal 7 (Bus error: nonexistent physical address)
==== backtrace (tid:    381) ====
 0 0x00000000000143c0 __funlockfile()  ???:0
 1 0x0000000000068d6c ncclProxyProgress()  ???:0
 2 0x0000000000008609 start_thread()  ???:0
=================================
"""
# the same thread in NCCL without a fatal signal (an ordinary dump), and SIGBUS outside NCCL
UCX_NO_SIGNAL = UCX_SIGBUS_NCCL.split("\n", 1)[1]
UCX_SIGBUS_ELSEWHERE = UCX_SIGBUS_NCCL.replace("ncclProxyProgress", "memcpy_avx_unaligned")
case("shm-sigbus-in-nccl-thread", "fires", "ucx-sigbus-in-nccl-proxy", meta=meta(engine=None, tp=None), stacks={"reported": UCX_SIGBUS_NCCL})
case("shm-sigbus-in-nccl-thread", "quiet", "ucx-nccl-without-signal", meta=meta(engine=None, tp=None), stacks={"reported": UCX_NO_SIGNAL})
case("shm-sigbus-in-nccl-thread", "quiet", "ucx-sigbus-outside-nccl", meta=meta(engine=None, tp=None), stacks={"reported": UCX_SIGBUS_ELSEWHERE})

case("first-failure-custom-allreduce", "fires", "capture-wraps-car-check", meta=meta(tp=2),
     log="[2026-11-29 23:04:10 TP1] Exception: Capture cuda graph failed: Runtime check failed at "
         "/sgl-workspace/sglang/sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:412: CUDA error: invalid argument\n")
case("first-failure-custom-allreduce", "fires", "ipc-handle-error", meta=meta("vllm", tp=4),
     log="(Worker_TP2 pid=811) ERROR 11-29 23:04:10 [multiproc_executor.py:597] RuntimeError: CUDA error: invalid argument "
         "(cudaIpcGetMemHandle at csrc/custom_all_reduce.cu:95)\n(EngineCore_DP0 pid=700) ERROR 11-29 23:04:11 [core.py:708] "
         "EngineCore failed to start.\n")
case("first-failure-custom-allreduce", "quiet", "capture-error-elsewhere", meta=meta(tp=2),
     log="[2026-11-29 23:04:10 TP0] Exception: Capture cuda graph failed: operation not permitted when stream is capturing\n")

case("first-failure-peer-access-outside-nccl", "fires", "runtime-error-peer-access", meta=meta(engine=None, gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=2),
     log="terminate called after throwing an instance of 'std::runtime_error'\n  what():  [TensorRT-LLM][ERROR] CUDA runtime error in "
         "::cudaDeviceEnablePeerAccess(peer, 0): peer access is not supported between these two devices\n")
case("first-failure-peer-access-outside-nccl", "quiet", "nccl-warn-peer-access", meta=meta(engine=None, gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=2),
     log="ws:10:20 [1] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these two devices'\n")

case("first-failure-peer-access-in-nccl", "fires", "p2p-transport-cuda-failure", meta=meta(engine=None, gpu="NVIDIA L40S", cc="8.9", tp=4),
     log="ws:10:20 [1] transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these two devices'\n"
         "ws:10:20 [1] NCCL INFO transport/p2p.cc:330 -> 1\n")
case("first-failure-peer-access-in-nccl", "quiet", "nccl-shm-warn", meta=meta(engine=None, tp=4),
     log="ws:10:20 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n")

RT_INVALID_DEVICE = "RuntimeError: CUDA Runtime API error: <cudaError_t.cudaErrorInvalidDevice: 101>\n"
# torch's set_device on a rank whose GPU index is past the visible ones (as on a real 1-GPU H200
# given two ranks), an older torch's wording, and a vLLM worker's; an IPC open failing is not it
SET_DEVICE_ORDINAL = (
    "Process SpawnProcess-2:\nTraceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap\n    self.run()\n'
    '  File "/opt/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 2790, in run_scheduler_process\n'
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
    '  File "/opt/venv/lib/python3.12/site-packages/torch/cuda/__init__.py", line 638, in set_device\n'
    "    torch._C._cuda_setDevice(device)\n"
    "torch.AcceleratorError: CUDA error: invalid device ordinal\nGPU device may be out of range, do you have enough GPUs?\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
)
OLD_TORCH_ORDINAL = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 99, in init_device\n'
    "    torch.cuda.set_device(self.device)\n"
    '  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py", line 404, in set_device\n'
    "    torch._C._cuda_setDevice(device)\n"
    "RuntimeError: CUDA error: invalid device ordinal\n"
)
case("first-failure-device-ordinal-at-set-device", "fires", "torch-set-device-past-the-visible-gpus", meta=meta(tp=2), cmdline=SG2,
     log=SET_DEVICE_ORDINAL)
case("first-failure-device-ordinal-at-set-device", "fires", "vllm-worker-old-torch", meta=meta("vllm", tp=4),
     cmdline=V2.replace("size 2", "size 4"), log=OLD_TORCH_ORDINAL)
case("first-failure-device-ordinal-at-set-device", "quiet", "ipc-open-in-custom-allreduce", meta=meta(engine=None, tp=4), log=RT_INVALID_DEVICE)
case("first-failure-device-ordinal-at-set-device", "quiet", "out-of-memory-at-set-device", meta=meta(tp=2), cmdline=SG2,
     log=SET_DEVICE_ORDINAL.replace("invalid device ordinal", "out of memory").replace("GPU device may be out of range, do you have enough GPUs?\n", ""))
case("first-failure-ipc-device-error", "fires", "cuda-python-invalid-device-tp4", meta=meta(engine=None, gpu="NVIDIA RTX A6000", cc="8.6", tp=4), log=RT_INVALID_DEVICE)
case("first-failure-ipc-device-error", "quiet", "single-gpu", meta=meta(engine=None, tp=1), log=RT_INVALID_DEVICE)
case("ipc-device-error-nccl-p2p", "fires", "cuda-python-invalid-device-pcie", meta=meta(engine=None, gpu="NVIDIA RTX A6000", cc="8.6", tp=4), log=RT_INVALID_DEVICE)
case("ipc-device-error-nccl-p2p", "quiet", "oom-instead", meta=meta(engine=None, tp=4), log="RuntimeError: CUDA error: out of memory\n")

NVLS = ("gpu-node-3:7712:7790 [5] transport/nvls.cc:155 NCCL WARN Cuda failure 1 'invalid argument'\n"
        "gpu-node-3:7712:7790 [5] NCCL INFO transport/nvls.cc:310 -> 1\ngpu-node-3:7712:7790 [5] NCCL INFO init.cc:1120 -> 1\n")
NVLS_OK = "gpu-node-3:7712:7790 [5] NCCL INFO NVLS multicast support is available on dev 5\ngpu-node-3:7712:7790 [5] NCCL INFO Connected NVLS\n"
for rid in ("first-failure-nvls-multicast", "nvls-failure-nccl-init"):
    case(rid, "fires", "nvls-cuda-failure", meta=meta(engine=None, gpu="NVIDIA H100 80GB HBM3", tp=8), log=NVLS)
    case(rid, "quiet", "nvls-connected", meta=meta(engine=None, gpu="NVIDIA H100 80GB HBM3", tp=8), log=NVLS_OK)

ENQ = "[1] enqueue.cc:1610 NCCL WARN Cuda failure 1 'invalid argument'\n[1] NCCL INFO group.cc:250 -> 1\n"
for rid in ("first-failure-nccl-kernel-launch", "nccl-kernel-launch-driver"):
    case(rid, "fires", "enqueue-invalid-argument", meta=meta(engine=None, tp=2), log=ENQ)
    case(rid, "quiet", "init-socket-failure", meta=meta(engine=None, tp=2), log="[1] misc/socket.cc:50 NCCL WARN Net : Connect to 10.1.1.1<4000> failed : Connection refused\n")

case("first-failure-nccl-socket", "fires", "address-family", meta=meta(engine=None, tp=None, nnodes=1),
     log="misc/socket.cc:402 NCCL WARN socket creation failed : Address family not supported by protocol\n")
case("first-failure-nccl-socket", "fires", "no-interface", meta=meta(engine=None, tp=None, nnodes=1),
     log="box:1:1 [0] NCCL INFO NET/Socket : No usable listening interface found\nbox:1:1 [0] bootstrap.cc:85 NCCL WARN Bootstrap : no socket interface found\n")
case("first-failure-nccl-socket", "quiet", "two-nodes", meta=meta(engine=None, tp=None, nnodes=2), cmdline="torchrun --nnodes 2 --nproc-per-node 8 train.py",
     log="misc/socket.cc:402 NCCL WARN socket creation failed : Address family not supported by protocol\n")

STORE_RETRY = "".join(f"[W1129 23:0{i}:00.000 socket.cpp:700] The client socket has failed to connect to [mac.lan]:29500 (errno: 60 - Operation timed out).\n" for i in range(3))
for rid, nnodes in (("store-connect-retries-one-node", 1), ("store-connect-retries-rendezvous", 2)):
    case(rid, "fires", "client-socket-retries", meta=meta("vllm", tp=2, nnodes=nnodes), log=STORE_RETRY)
    case(rid, "quiet", "one-timeout", meta=meta("vllm", tp=2, nnodes=nnodes), log=STORE_RETRY.splitlines()[0] + "\n")

FI_TB = "\n".join([
    "[2026-11-29 23:05:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/layers/attention/flashinfer_backend.py", line 480, in init_forward_metadata',
    "    self.indices_updater_decode.update(",
    '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/core.py", line 140, in build_and_load',
    "    self.build(verbose)",
    "RuntimeError: Ninja build failed. Ninja output:"])
case("first-failure-flashinfer-build", "fires", "jit-build-on-sm120", meta=meta(gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", cc="12.0", tp=1), log=FI_TB)
case("first-failure-flashinfer-build", "quiet", "jit-build-on-hopper", meta=meta(tp=1), log=FI_TB)
case("flashinfer-build-failure", "fires", "jit-build-on-hopper", meta=meta(tp=1), log=FI_TB)
case("flashinfer-build-failure", "quiet", "triton-build", meta=meta(tp=1), log=FI_TB.replace("flashinfer/jit/core.py", "triton/compiler/compiler.py").replace("flashinfer_backend", "triton_backend"))

PROXY_PAGE = ('[2026-11-29 23:06:10] Initialization failed. warmup error: <!DOCTYPE html><html><head><title>ERROR: The requested URL could not be retrieved</title>'
              '</head><body><p id="sysmsg">The system returned: <i>(111) Connection refused</i></p></body></html>\n')
case("proxy-answered-local-request", "fires", "squid-page-in-warmup", meta=meta(tp=1), log=PROXY_PAGE)
case("proxy-answered-local-request", "quiet", "plain-refused", meta=meta(tp=1), log="[2026-11-29 23:06:10] Initialization failed. warmup error: ConnectionRefusedError: [Errno 111] Connection refused\n")

NATIVE_LAUNCH = "\n".join([
    'Thread 3001 (idle): "MainThread"', "    cudaLaunchKernel (libcudart.so.12)",
    "    ncclStrongStreamLaunchKernel(ncclCudaGraph, ncclStrongStream*, void*, dim3, dim3, void**, unsigned long) (libnccl.so.2)",
    "    ncclLaunchKernel(ncclComm*, ncclKernelPlan*) (libnccl.so.2)", "    ncclGroupEndInternal() (libnccl.so.2)", ""])
case("nccl-launch-blocking-deadlock", "fires", "launch-blocking-set", meta=meta(engine=None, tp=4), env=env(CUDA_LAUNCH_BLOCKING="1"), stacks={"reported": NATIVE_LAUNCH})
case("nccl-launch-blocking-deadlock", "quiet", "launch-blocking-unset", meta=meta(engine=None, tp=4), env=env(CUDA_LAUNCH_BLOCKING="0"), stacks={"reported": NATIVE_LAUNCH})

SPIN = "\n".join(['Thread 77 (active): "MainThread"', "    sched_yield (libc.so.6)", "    ncclLaunchKernelBefore_NoUncapturedCuda (enqueue.cc:1012)",
                  "    doLaunches (group.cc:170)", "    groupLaunch (group.cc:350)", "    ncclGroupEndInternal (group.cc:430)", ""])
WAIT = "\n".join(['Thread 77 (active): "MainThread"', "    cudaStreamSynchronize (libcudart.so.12)", "    synchronize (torch/cuda/streams.py:107)", ""])
case("nccl-host-launch-spin", "fires", "spin-in-launch-before", meta=meta(engine=None, tp=8), stacks={"reported": SPIN})
case("nccl-host-launch-spin", "quiet", "waits-on-stream", meta=meta(engine=None, tp=8), stacks={"reported": WAIT})

REG0 = "\n".join([v_line("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67", file="gpu_model_runner.py:4100", proc="Worker_TP0", pid=2100),
                  v_line("Registering 0 cuda graph addresses", file="custom_all_reduce.py:213", proc="Worker_TP0", pid=2100),
                  v_line("Registering 0 cuda graph addresses", file="custom_all_reduce.py:213", proc="Worker_TP1", pid=2101)])
REGN = REG0.replace("Registering 0 cuda", "Registering 3120 cuda")
case("graph-capture-after-empty-registration", "fires", "registered-none-then-silent", meta=meta("vllm", tp=2), cmdline=V2, log=REG0)
case("graph-capture-after-empty-registration", "quiet", "registered-many", meta=meta("vllm", tp=2), cmdline=V2, log=REGN)
case("empty-registration-custom-allreduce", "fires", "registered-none-then-silent", meta=meta("vllm", tp=2), cmdline=V2, log=REG0)
case("empty-registration-custom-allreduce", "quiet", "capture-finished", meta=meta("vllm", tp=2), cmdline=V2,
     log=REG0 + "\n" + v_line("Graph capturing finished in 12 secs, took 0.41 GiB", file="gpu_model_runner.py:4200"))

# where the first failure raised (rules/failures.yaml, second part)
case("first-failure-driver", "fires", "802-in-torch-init", meta=meta("vllm", tp=8),
     log="RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() "
         "that might have already set an error? Error 802: system not yet initialized\n")
case("first-failure-driver", "fires", "nvml-mismatch", meta=meta(tp=2), log="Failed to initialize NVML: Driver/library version mismatch\n")
case("first-failure-driver", "quiet", "oom", meta=meta(tp=2), log="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")

KV_OOM = "\n".join([
    "(EngineCore_DP0 pid=900) ERROR 11-29 23:20:01 [core.py:708] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=900) ERROR 11-29 23:20:01 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 190, in _initialize_kv_caches',
    "(EngineCore_DP0 pid=900) ERROR 11-29 23:20:01 [core.py:708]     kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs, available_gpu_memory)",
    "(EngineCore_DP0 pid=900) ERROR 11-29 23:20:01 [core.py:708] ValueError: To serve at least one request with the models's max seq len (131072), "
    "(16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.12 GiB). Try increasing `gpu_memory_utilization`"])
case("first-failure-oom-in-kv-pool", "fires", "kv-larger-than-available", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B", log=KV_OOM)
case("first-failure-oom-in-kv-pool", "fires", "sglang-not-enough-memory", meta=meta(tp=1),
     log="[2026-11-29 23:20:01] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")
case("first-failure-oom-in-kv-pool", "quiet", "oom-in-forward", meta=meta(tp=1),
     log="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB (at forward)\n")
case("first-failure-oom-at-start", "fires", "cuda-oom", meta=meta(tp=1), log="RuntimeError: CUDA error: out of memory\n")
case("first-failure-oom-at-start", "quiet", "invalid-argument", meta=meta(tp=1), log="RuntimeError: CUDA error: invalid argument\n")

CAP_TB = "\n".join([
    "[2026-11-29 23:30:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 410, in capture_one_batch_size',
    "    run_once()",
    '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 186, in __exit__',
    "    self.cuda_graph.capture_end()",
    "RuntimeError: CUDA error: operation failed due to a previous error during capture"])
case("first-failure-in-graph-capture", "fires", "capture-end-error", meta=meta(tp=1), log=CAP_TB)
case("first-failure-in-graph-capture", "quiet", "car-in-capture", meta=meta(tp=2),
     log=CAP_TB.replace("operation failed due to a previous error during capture", "invalid argument at custom_all_reduce.cuh:99"))

TOK_TB = "\n".join([
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/tokenizer.py", line 220, in get_tokenizer',
    "    tokenizer = AutoTokenizer.from_pretrained(",
    '  File "/usr/local/lib/python3.12/dist-packages/transformers/tokenization_utils_base.py", line 2050, in from_pretrained',
    "    raise EnvironmentError(",
    "OSError: Can't load tokenizer for 'org/model'. Make sure that 'org/model' is the correct path to a directory containing all relevant files"])
case("first-failure-in-tokenizer", "fires", "cannot-load-tokenizer", meta=meta("vllm", tp=1), log=TOK_TB)
case("first-failure-in-tokenizer", "quiet", "bind-in-tokenizer-manager", meta=meta(tp=1),
     log="[2026-11-29 23:02:00] TokenizerManager hit an exception: zmq.error.ZMQError: Address already in use\n")

W_TB = "\n".join([
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_loader/weight_utils.py", line 610, in safetensors_weights_iterator',
    "    with safe_open(st_file, framework=\"pt\") as f:",
    "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"])
case("first-failure-reading-weights", "fires", "incomplete-shard", meta=meta(tp=1), log=W_TB)
case("first-failure-reading-weights", "fires", "nfs-stale-handle", meta=meta("vllm", tp=4),
     log="OSError: [Errno 116] Stale file handle: '/mnt/nfs/models/Llama-3.3-70B/model-00007-of-00030.safetensors'\n")
case("first-failure-reading-weights", "quiet", "weights-fine-oom", meta=meta(tp=1), log="torch.OutOfMemoryError: CUDA out of memory.\n")
case("first-failure-cuda-init-ambiguous", "fires", "unknown-error-at-init", meta=meta(tp=1),
     log="RuntimeError: CUDA error: unknown error\nCUDA kernel errors might be asynchronously reported at some other API call\n")
case("first-failure-cuda-init-ambiguous", "quiet", "invalid-argument", meta=meta(tp=1), log="RuntimeError: CUDA error: invalid argument\n")

# =================================================================== engines' own start-up checks (issue 19)

case("startup-free-memory-precheck", "fires", "vllm-v1-worker-precheck", meta=meta("vllm", tp=1), cmdline="vllm serve /models/Qwen3-8B --gpu-memory-utilization 0.9",
     log="\n".join([v_line("Free memory on device cuda:0 (12.4/79.1 GiB) on startup is less than desired GPU memory utilization (0.9, 71.2 GiB). "
                           "Decrease GPU memory utilization or reduce GPU memory used by other processes.", "core.py:708", level="ERROR"),
                    v_line("EngineCore failed to start.", "core.py:712", level="ERROR")]))
case("startup-free-memory-precheck", "fires", "sglang-unbalanced-capacity", meta=meta(tp=4), cmdline=SG4,
     log=sg_log("init_end", tp=4, extra=["[2026-11-29 23:04:00 TP2] Scheduler hit an exception: Traceback (most recent call last):",
                                         "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
                                         "min_per_gpu_memory=20.11, local_gpu_memory=78.52, local_gpu_memory * 0.9=70.67"]))
case("startup-free-memory-precheck", "quiet", "kv-too-small", meta=meta("vllm", tp=1), log=KV_OOM)

case("kv-none-left-under-shared-fraction", "fires", "v0-small-fraction", meta=meta("vllm", tp=1),
     cmdline="python -m vllm.entrypoints.openai.api_server --model /models/Qwen2.5-7B-Instruct --gpu-memory-utilization 0.3",
     log="ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n")
case("kv-none-left-under-shared-fraction", "quiet", "whole-gpu-fraction", meta=meta("vllm", tp=1),
     cmdline="python -m vllm.entrypoints.openai.api_server --model /models/Qwen2.5-72B-Instruct --gpu-memory-utilization 0.95",
     log="ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n")

case("bind-failed-log", "fires", "cpp-http-server", meta=meta(engine=None, tp=1), log="\n".join([
    "main: HTTP server is listening, hostname: 127.0.0.1, port: 8080, http threads: 7",
    "main: couldn't bind to server socket: hostname=0.0.0.0 port=8000",
    "main: exiting due to HTTP server error"]))
case("bind-failed-log", "fires", "collective-listener-bound", meta=meta(engine=None, tp=8), log="\n".join([
    "[rank2]: RuntimeError: create communicator failed: error code is 11",
    "[rank2]: EI0006: Failed to bind the IP port. Reason: The IP address and port have been bound already. port[16666]"]))
case("bind-failed-log", "quiet", "ipv6-unsupported", meta=meta(tp=2), cmdline=SG2, log=sg_log("init_begin", tp=2, extra=[
    "[W socket.cpp:697] [c10d] The server socket has failed to bind to [::]:29500 (errno: 97 - Address family not supported by protocol)."]))

case("uvicorn-workers-respawning", "fires", "tokenizer-workers", meta=meta(tp=1),
     cmdline="python3 -m sglang.launch_server --model-path /models/Qwen3-8B --tokenizer-worker-num 4",
     log="\n".join(["[2026-11-29 23:05:01] INFO:     Started parent process [41200]",
                    "[2026-11-29 23:05:31] INFO:     Waiting for child process [41233]",
                    "[2026-11-29 23:05:31] INFO:     Child process [41233] died",
                    "[2026-11-29 23:05:32] INFO:     Started server process [41301]",
                    "[2026-11-29 23:06:02] INFO:     Waiting for child process [41301]",
                    "[2026-11-29 23:06:02] INFO:     Child process [41301] died"]))
case("uvicorn-workers-respawning", "quiet", "one-scheduler-died", meta=meta(tp=2), cmdline=SG2, log=sg_log("load_begin", tp=2, extra=[
    "[2026-11-29 23:04:00] Child process unexpectedly failed with exitcode=-9. pid=4412"]))
case("dead-rank-log", "quiet", "uvicorn-worker-respawned", meta=meta(tp=1), log="\n".join([
    "[2026-11-29 23:05:31] INFO:     Waiting for child process [41233]",
    "[2026-11-29 23:05:31] INFO:     Child process [41233] died"]))

case("jit-compile-took-minutes", "fires", "sglang-torch-compile-total", meta=meta(tp=1), log="\n".join([
    "[2026-11-29 23:20:01] Compiling piecewise CUDA graph for num tokens [8192, 4096]",
    "[2026-11-29 23:31:40] Dynamo bytecode transform time: 699.31 s"]))
case("jit-compile-took-minutes", "quiet", "compile-took-seconds", meta=meta("vllm", tp=1), log="\n".join([
    v_line("torch.compile takes 41.52 s in total", "monitor.py:34")]))
case("jit-compile-took-minutes", "quiet", "long-compile-then-capture", meta=meta("vllm", tp=1), log="\n".join([
    v_line("torch.compile takes 912.02 s in total", "monitor.py:34")] + [
    v_line(f"Capturing CUDA graph shapes: {i}%", "cuda_graph.py:120") for i in range(10, 100, 10)]))

case("kv-component-not-created", "fires", "executor-kv-component", meta=meta(engine=None, tp=4), log="\n".join([
    "[RANK 0] [E] Executor creation failed due to insufficient GPU memory.",
    "Component that could not be created: KV cache (requested 61.2 GiB, free 12.7 GiB)"]))
case("kv-component-not-created", "quiet", "sampler-not-created", meta=meta(engine=None, tp=4), log="\n".join([
    "[RANK 0] [E] Executor creation failed due to insufficient GPU memory.",
    "The following component could not be created: Sampler"]))

case("ipc-device-error-nccl-p2p", "quiet", "inside-graph-capture", meta=meta(gpu="NVIDIA GeForce RTX 5090", cc="12.0", tp=2), log="\n".join([
    "RuntimeError: CUDA error: invalid resource handle",
    "Exception: Capture cuda graph failed: CUDA error: invalid resource handle"]))
case("first-failure-ipc-device-error", "quiet", "inside-graph-capture", meta=meta(tp=4), log="\n".join([
    "RuntimeError: CUDA error: invalid resource handle (at /sgl-kernel/csrc/attention/merge_state.cu:120)",
    "Exception: CUDA graph capture failed: CUDA error: invalid resource handle"]))

case("nccl-p2p-channels-last-pcie", "fires", "rtx-channels-last", meta=meta("vllm", gpu="NVIDIA GeForce RTX 4090", cc="8.9", tp=4), cmdline=V4,
     env=env(NCCL_DEBUG="INFO"), log=v_log("dist", tp=4, extra=P2P_LINES))
case("nccl-p2p-channels-last-pcie", "quiet", "nvlink-channels-last", meta=meta("vllm", gpu="NVIDIA H100 80GB HBM3", cc="9.0", tp=4), cmdline=V4,
     env=env(NCCL_DEBUG="INFO"), log=v_log("dist", tp=4, extra=P2P_LINES))

case("first-failure-network-fs-weights", "fires", "stale-handle-no-frame", meta=meta("vllm", tp=2), log="OSError: [Errno 116] Stale file handle\n")
case("first-failure-network-fs-weights", "quiet", "stale-jit-lock-frame", meta=meta(tp=2), log="\n".join([
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/filelock/_api.py", line 332, in release',
    "    self._release()",
    "OSError: [Errno 116] Stale file handle"]))
case("first-failure-network-fs-jit-lock", "fires", "stale-handle-no-frame", meta=meta(tp=4), log="OSError: [Errno 5] Input/output error\n")
case("first-failure-network-fs-jit-lock", "quiet", "stale-weight-shard", meta=meta("vllm", tp=4),
     log="OSError: [Errno 116] Stale file handle: '/mnt/nfs/models/Qwen3-32B/model-00003-of-00017.safetensors'\n")

case("first-failure-model-hub-unreachable", "fires", "sglang-hub-proxy", meta=meta(tp=1), log="\n".join([
    "[2026-11-29 23:01:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B')",
    "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache."]))
case("first-failure-model-hub-unreachable", "quiet", "local-path-oom", meta=meta(tp=1),
     log="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")

case("peer-access-unavailable-then-failed", "fires", "vllm-p2p-warning-then-crash", meta=meta("vllm", gpu="NVIDIA GeForce RTX 3090", cc="8.6", tp=2), cmdline=V2,
     log="\n".join(["WARNING 11-29 23:01:00 [custom_all_reduce.py:88] P2P access is not supported between GPU 0 and GPU 1",
                    "terminate called after throwing an instance of 'c10::Error'",
                    "Aborted (core dumped)"]))
case("peer-access-unavailable-then-failed", "quiet", "custom-allreduce-disabled", meta=meta("vllm", gpu="NVIDIA GeForce RTX 3090", cc="8.6", tp=2), cmdline=V2,
     log="\n".join(["WARNING 11-29 23:01:00 [custom_all_reduce.py:88] Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed.",
                    "WARNING 11-29 23:01:00 peer access is not supported between GPU 0 and GPU 1",
                    "RuntimeError: CUDA error: out of memory"]))
# Repeated waits (rules/waits.yaml): the same wait line again and again, nothing else new after it.
STORE_WAIT = ("[2026-11-29 23:14:{s:02d} TP0] Waiting in store based barrier to initialize process group for rank: 0, "
              "key: store_based_barrier_key:1 (world_size=2, num_workers_joined=1, timeout=0:30:00)")
case("repeated-wait-on-store", "fires", "store-barrier-every-10s", meta=meta(tp=2, since_last_progress_s=62.0),
     cmdline=SG2, log=sg_log("init_begin", extra=[STORE_WAIT.format(s=s) for s in (0, 10, 20, 30, 40, 50)]))
case("repeated-wait-on-store", "quiet", "second-rank-joined", meta=meta(tp=2, since_last_progress_s=2.0),
     cmdline=SG2, log=sg_log("init_begin", extra=[STORE_WAIT.format(s=s) for s in (0, 10, 20)]
                             + ["[2026-11-29 23:14:25 TP0] Rank 0: Completed store-based barrier for key:store_based_barrier_key:1 with 2 nodes."]))
LOCK_WAIT = "Lock 139822 not acquired on /root/.cache/flashinfer/0.4.1/90a/cached_ops/tmp/batch_prefill_with_kv_cache.lock, waiting 0.05 seconds ..."
case("repeated-wait-on-lock", "fires", "filelock-never-acquired", meta=meta(tp=1, since_last_progress_s=45.0),
     env=env(FLASHINFER_LOGGING_LEVEL="DEBUG"), log=sg_log("capture_begin", tp=1, extra=[LOCK_WAIT] * 5), procs=procs(1))
case("repeated-wait-on-lock", "quiet", "compiler-holds-it", meta=meta(tp=1, since_last_progress_s=45.0),
     env=env(FLASHINFER_LOGGING_LEVEL="DEBUG"), log=sg_log("capture_begin", tp=1, extra=[LOCK_WAIT] * 5), procs=procs(1, compilers=1))
