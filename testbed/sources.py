"""The public reports each behaviour of the test bed follows (cited in labels and README)."""

MEGASCALE = "MegaScale (ByteDance, NSDI'24, arXiv 2402.15627): stragglers, NIC flapping, MFU drop"
LLAMA3 = (
    "Llama 3 Herd of Models (Meta, 2024, sec. 3.3.4): 419 interruptions in 54 days, 58.7% "
    "GPU (30.1% faulty GPU, 17.2% HBM3), 8.4% network switch/cable; diurnal 1-2% "
    "throughput from temperature; power swings when all GPUs wait for checkpoints"
)
FALCON = (
    "Falcon/Greyhound (Alibaba+HKUST, arXiv 2410.12588, ATC'25): fail-slows from CPU/GPU "
    "contention, GPU degradation and network congestion, sub-minute to ~10 h; "
    "communication fail-slows more frequent (40%) and longer than compute ones"
)
BYTEDANCE_STRAGGLERS = (
    "ByteDance straggler study (5-month trace): stragglers are not always "
    "hardware; stage imbalance and sequence lengths cause many"
)
OFA_COUNTERS = (
    "OpenFabrics wiki, Overview of Error Counters: LinkDowned = port flapping, link "
    "speed/width not at maximum (reseat), PortXmitWait almost always non-zero, "
    "large = congestion"
)
NVIDIA_XID = (
    "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors): 79 fallen off the bus, 94/95 ECC"
)
PCIE_DOWNTRAIN = (
    "Operator runbooks on PCIe links trained down (x16 -> x8, LnkSta < LnkCap): no "
    "XID, silent halving of host/NIC bandwidth; idle GPUs drop to Gen1 to save power"
)
CHECKPOINT_FS = (
    "Llama 3 (Tectonic, 2 TB/s sustained, checkpoints 1 MB-4 GB per GPU) and parallel "
    "FS checkpoint stall write-ups: every rank waits on the shared filesystem alike"
)
MOE_IMBALANCE = (
    "MoE expert-parallel load imbalance write-ups (Capacity-Aware Inference, arXiv "
    "2503.05066; Qwen global-batch balance): hot experts move from step to step"
)
