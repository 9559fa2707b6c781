from dataclasses import dataclass


@dataclass
class OffloadPolicy:
    keep: int = 1
    pin_memory: bool = False


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    pin_memory: bool = True
