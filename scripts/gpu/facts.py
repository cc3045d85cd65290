"""Facts about the device machine that the GPU checks print or use (scripts/gpu/setup.sh).

    python3 facts.py nvml-energy    the GPU's energy counter (NVML), in mJ
    python3 facts.py torch          torch's version and whether it sees CUDA
    python3 facts.py torch-device   torch's version, its CUDA and the first device's name
    python3 facts.py font           DejaVu Sans as matplotlib ships it (for kiln report)
"""

import os
import sys


def nvml_energy():
    import pynvml as n

    n.nvmlInit()
    handle = n.nvmlDeviceGetHandleByIndex(0)
    print("nvml-counter-mJ", n.nvmlDeviceGetTotalEnergyConsumption(handle))


def torch_available():
    import torch

    print(torch.__version__, torch.cuda.is_available())


def torch_device():
    import torch

    print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))


def font():
    import matplotlib

    print(os.path.join(matplotlib.get_data_path(), "fonts", "ttf", "DejaVuSans.ttf"))


FACTS = {"nvml-energy": nvml_energy, "torch": torch_available, "torch-device": torch_device,
         "font": font}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in FACTS:
        sys.exit(f"usage: facts.py {{{'|'.join(FACTS)}}}")
    FACTS[sys.argv[1]]()
