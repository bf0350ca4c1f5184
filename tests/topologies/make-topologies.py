#!/usr/bin/env python3
"""Regenerate the test topologies in this directory (hwloc 2 XML).

hwloc's synthetic descriptions have no I/O devices, so the GPU nodes are
written from a synthetic CPU part (exported by lstopo) with PCI devices
added under their packages, as hwloc itself exports a real machine.
Run from this directory: ./make-topologies.py (needs lstopo-no-graphics)."""
import re
import subprocess

def synthetic_xml(description):
    return subprocess.run(["lstopo-no-graphics", "--of", "xml", "-i", description, "-"],
                          check=True, capture_output=True, text=True).stdout

def clean(xml):
    # Drop lines that name the machine or program that made the file.
    return "".join(l for l in xml.splitlines(True) if "ProcessName" not in l and "hwlocVersion" not in l)

def with_pci(xml, devices_by_package, cuda_memory_kib=None):
    """devices_by_package: {package os_index: [(busid, class, vendor, device)]}, in the order to write.
    cuda_memory_kib: NVIDIA GPUs get the OS device hwloc's CUDA backend adds (cuda0, ... in bus
    order) with this CUDAGlobalMemorySize."""
    gp = [10000]
    nvidia_gpus = sorted(d[0] for ds in devices_by_package.values() for d in ds
                         if d[2] == NVIDIA and d[1] >> 8 in (0x03, 0x12))
    def obj(busid, cls, vendor, device):
        gp[0] += 3
        dom, bus = busid.split(":")[0], busid.split(":")[1]
        pci = (f'        <object type="PCIDev" gp_index="{gp[0] + 1}" pci_busid="{busid}" '
               f'pci_type="{cls:04x} [{vendor:04x}:{device:04x}] [{vendor:04x}:0000] a1" '
               f'pci_link_speed="0.000000"')
        if cuda_memory_kib and busid in nvidia_gpus:
            pci += (f'>\n          <object type="OSDev" gp_index="{gp[0] + 2}" name="cuda{nvidia_gpus.index(busid)}" '
                    f'subtype="CUDA" osdev_type="5">\n'
                    f'            <info name="Backend" value="CUDA"/>\n'
                    f'            <info name="CUDAGlobalMemorySize" value="{cuda_memory_kib}"/>\n'
                    f'          </object>\n        </object>\n')
        else:
            pci += '/>\n'
        return (f'      <object type="Bridge" gp_index="{gp[0]}" bridge_type="0-1" depth="0" '
                f'bridge_pci="{dom}:[{bus}-{bus}]">\n' + pci + '      </object>\n')
    out, package = [], None
    for line in xml.splitlines(True):
        m = re.match(r'\s*<object type="Package" os_index="(\d+)"', line)
        if m:
            package = int(m.group(1))
        # A package's closing tag is the first "    </object>" (4 spaces) after it.
        if package is not None and line == "    </object>\n":
            out.extend(obj(*d) for d in devices_by_package.get(package, []))
            package = None
        out.append(line)
    return "".join(out)

NVIDIA, AMD, ASPEED, MELLANOX = 0x10de, 0x1002, 0x1a03, 0x15b3
H100, RTX_A6000, NVSWITCH, MI300X = 0x2330, 0x2230, 0x22a3, 0x74a1

# A DGX H100-like node: 2 sockets of 8 cores, 8 H100 (3D controllers, class 0302),
# 4 per socket, listed out of bus order (libfsdp numbers GPUs by bus id);
# also a BMC's VGA chip, a NIC and an NVSwitch, none of which is a GPU. The GPUs
# carry their memory as an lstopo run where hwloc has its CUDA backend writes it.
dgx = with_pci(synthetic_xml("pack:2 numa:1 core:8 pu:1"), {
    0: [("0000:3a:00.0", 0x0302, NVIDIA, H100), ("0000:18:00.0", 0x0302, NVIDIA, H100),
        ("0000:03:00.0", 0x0300, ASPEED, 0x2000), ("0000:5d:00.0", 0x0302, NVIDIA, H100),
        ("0000:2a:00.0", 0x0302, NVIDIA, H100), ("0000:1a:00.0", 0x0207, MELLANOX, 0x1021)],
    1: [("0000:9a:00.0", 0x0302, NVIDIA, H100), ("0000:ab:00.0", 0x0302, NVIDIA, H100),
        ("0000:ba:00.0", 0x0302, NVIDIA, H100), ("0000:db:00.0", 0x0302, NVIDIA, H100),
        ("0000:c5:00.0", 0x0680, NVIDIA, NVSWITCH)],
}, cuda_memory_kib=80 << 20)  # 80 GiB each, as hwloc's CUDA backend writes it (KiB)
# 2 sockets of 4 cores (2 PUs each), one GPU per socket: an NVIDIA display GPU
# (VGA, class 0300) and an AMD MI300X (processing accelerator, class 1200);
# fewer GPUs than ranks in most tests.
workstation = with_pci(synthetic_xml("pack:2 numa:1 core:4 pu:2"), {
    0: [("0000:01:00.0", 0x0300, NVIDIA, RTX_A6000)],
    1: [("0000:81:00.0", 0x1200, AMD, MI300X)],
})
# A CPU node with 4 NUMA domains in one socket (an EPYC in NPS4 mode), no GPUs.
numa4 = synthetic_xml("pack:1 numa:4 core:4 pu:2")

for name, xml in [("2socket-8gpu.xml", dgx), ("2socket-2gpu.xml", workstation), ("1socket-4numa.xml", numa4)]:
    with open(name, "w") as f:
        f.write(clean(xml))
