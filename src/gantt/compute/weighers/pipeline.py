"""The weighers ``weight_classes`` names, in the order they run (their terms are summed in it, and a dry run lists
their contributions in it). Imports every family so all are registered."""

from gantt.compute.weighers.base import WEIGHERS, Weigher

# Import for registration side effects; each module holds one family of weighers.
from gantt.compute.weighers import affinity, build_failure, hypervisor, load, metrics, pci, resources  # noqa: F401  isort: skip

# nova.scheduler.weights.all_weighers, in the order the weighers run.
ALL_WEIGHERS = (
    "ServerGroupSoftAffinityWeigher", "ServerGroupSoftAntiAffinityWeigher", "BuildFailureWeigher",
    "HypervisorVersionWeigher", "IoOpsWeigher", "NumInstancesWeigher", "MetricsWeigher", "RAMWeigher", "CPUWeigher",
    "DiskWeigher", "PCIWeigher",
)


def resolve(names: list[str]) -> list[type[Weigher]]:
    """``weight_classes``, in its order, each weigher once; ``nova.scheduler.weights.all_weighers`` (any path
    ending so) stands for ``ALL_WEIGHERS``."""
    out: list[type[Weigher]] = []
    for name in names:
        found = [WEIGHERS[n] for n in ALL_WEIGHERS] if name.endswith("all_weighers") else [WEIGHERS.find(name)]
        out.extend(cls for cls in found if cls not in out)
    return out


def _check_all_weighers() -> None:
    # A registered weigher missing from the list would silently never run under all_weighers.
    if set(WEIGHERS) != set(ALL_WEIGHERS):
        raise TypeError(f"registered weighers {sorted(WEIGHERS)} are not those ALL_WEIGHERS names: "
                        f"{sorted(ALL_WEIGHERS)}")


_check_all_weighers()
