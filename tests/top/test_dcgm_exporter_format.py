"""The dcgm-exporter stand-in writes what dcgm-exporter writes: its output is compared byte
for byte with lines of real exporters, quoted verbatim from the sources named."""

from tests.standins import dcgm_exporter as dcgm

H100 = "NVIDIA H100 80GB HBM3"


def test_a_v4_exporter_with_a_pod_on_one_gpu():
    """NVIDIA/dcgm-exporter issue #490 (2025-04-30): `Hostname`, the driver version label
    counter, pod attributes only on the GPU a pod holds."""
    devices = [
        dcgm.Device(
            0,
            "GPU-8b2281de-6d3c-22ed-0ec8-d3b864870b8b",
            H100,
            {"DCGM_FI_DEV_GPU_UTIL": 0},
            [dcgm.Holder("default", "dcgmproftester2", "dcgmproftester2")],
            pci_bus_id="00000000:8D:00.0",
        ),
        dcgm.Device(
            1,
            "GPU-15338f3e-5fd9-962d-921a-979b820520f0",
            H100,
            {"DCGM_FI_DEV_GPU_UTIL": 0},
            pci_bus_id="00000000:91:00.0",
        ),
    ]
    release = dcgm.Release(host_label="Hostname", driver_version="550.144.03")
    assert dcgm.metrics_text(devices, "computeinstance-e00c1p6dpy98xytphp", release) == (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-8b2281de-6d3c-22ed-0ec8-d3b864870b8b",'
        'pci_bus_id="00000000:8D:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
        'Hostname="computeinstance-e00c1p6dpy98xytphp",DCGM_FI_DRIVER_VERSION="550.144.03",'
        'container="dcgmproftester2",namespace="default",pod="dcgmproftester2"} 0\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-15338f3e-5fd9-962d-921a-979b820520f0",'
        'pci_bus_id="00000000:91:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",'
        'Hostname="computeinstance-e00c1p6dpy98xytphp",DCGM_FI_DRIVER_VERSION="550.144.03"} 0\n'
    )


def test_mig_instances_and_a_float_field():
    """NVIDIA/dcgm-exporter issue #512 (2025-08-19): the MIG labels sit between modelName
    and the host label; a double field is written with %f."""
    uuid = "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"
    pod = "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"
    devices = [
        dcgm.Device(
            0,
            uuid,
            H100,
            {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0},
            [dcgm.Holder("model-playground-stg", pod, "kserve-container")],
            mig=("1g.10gb", 7),
            pci_bus_id="00000000:1A:00.0",
        ),
        dcgm.Device(
            0,
            uuid,
            H100,
            {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0},
            mig=("1g.10gb", 8),
            pci_bus_id="00000000:1A:00.0",
        ),
    ]
    release = dcgm.Release(host_label="Hostname", driver_version="535.129.03")
    lines = dcgm.metrics_text(devices, "gsrh100-074", release).splitlines()
    assert lines[2:] == [
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77",'
        'pci_bus_id="00000000:1A:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
        'GPU_I_PROFILE="1g.10gb",GPU_I_ID="7",Hostname="gsrh100-074",'
        'DCGM_FI_DRIVER_VERSION="535.129.03",container="kserve-container",'
        'namespace="model-playground-stg",'
        'pod="text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"} 0.000000',
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77",'
        'pci_bus_id="00000000:1A:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
        'GPU_I_PROFILE="1g.10gb",GPU_I_ID="8",Hostname="gsrh100-074",'
        'DCGM_FI_DRIVER_VERSION="535.129.03"} 0.000000',
    ]


def test_a_current_release_writes_lower_case_hostname():
    """NVIDIA/dcgm-exporter PR #736 (2026-09-15), a build after #655 renamed the label."""
    devices = [
        dcgm.Device(
            1,
            "GPU-fc60126e-514d-3522-2828-c5daa8e99d85",
            "NVIDIA RTX 2000 Ada Generation",
            {"DCGM_FI_DEV_FB_FREE": 11275},
            pci_bus_id="00000000:B1:00.0",
        ),
        dcgm.Device(
            2,
            "GPU-63bc0b91-2265-1b94-831c-15c41fe92675",
            "NVIDIA A30",
            {"DCGM_FI_DEV_FB_FREE": 2207},
            [dcgm.Holder("default", "triton-server-f7cb5d77-95xcf", "triton-server")],
            mig=("1g.6gb", 3),
            pci_bus_id="00000000:CA:00.0",
        ),
    ]
    text = dcgm.metrics_text(devices, "dcgm-exporter-wwwjh", dcgm.Release(driver_version=None))
    assert text.splitlines() == [
        "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).",
        "# TYPE DCGM_FI_DEV_FB_FREE gauge",
        'DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-fc60126e-514d-3522-2828-c5daa8e99d85",'
        'pci_bus_id="00000000:B1:00.0",device="nvidia1",modelName="NVIDIA RTX 2000 Ada Generation",'
        'hostname="dcgm-exporter-wwwjh"} 11275',
        'DCGM_FI_DEV_FB_FREE{gpu="2",UUID="GPU-63bc0b91-2265-1b94-831c-15c41fe92675",'
        'pci_bus_id="00000000:CA:00.0",device="nvidia2",modelName="NVIDIA A30",'
        'GPU_I_PROFILE="1g.6gb",GPU_I_ID="3",hostname="dcgm-exporter-wwwjh",'
        'container="triton-server",namespace="default",pod="triton-server-f7cb5d77-95xcf"} 2207',
    ]


def test_shared_gpus_get_a_series_per_pod_and_the_devices_own_per_process_totals():
    """internal/pkg/transformation/kubernetes.go (KubernetesVirtualGPUs): per-process fields
    keep the device's series and add each pod's share; the others are copied per pod."""
    pods = [
        dcgm.Holder("ns", "a", "c", share={"DCGM_FI_DEV_GPU_UTIL": 10}),
        dcgm.Holder("ns", "b", "c", share={"DCGM_FI_DEV_GPU_UTIL": 20}),
    ]
    device = dcgm.Device(
        0, "GPU-x", "NVIDIA L4", {"DCGM_FI_DEV_GPU_UTIL": 30, "DCGM_FI_DEV_GPU_TEMP": 50}, pods
    )
    text = dcgm.metrics_text([device], "n", dcgm.Release(shared=True, driver_version=None))
    tails = [ln.split('modelName="NVIDIA L4",')[1] for ln in text.splitlines() if "{" in ln]
    assert tails == [
        'hostname="n",container="c",namespace="ns",pod="a"} 50',
        'hostname="n",container="c",namespace="ns",pod="b"} 50',
        'hostname="n"} 30',
        'hostname="n",container="c",namespace="ns",pod="a"} 10',
        'hostname="n",container="c",namespace="ns",pod="b"} 20',
    ]


def test_the_xid_field_carries_its_code_and_text_among_the_pod_attributes():
    """internal/pkg/collector/gpu_collector.go (toMetric: DCGM_FI_DEV_XID_ERRORS gets the
    attributes err_code and err_msg, xid_errors.go's text for the code) and
    internal/pkg/rendermetrics/render_metrics.go (the attributes, the pod's included, are one
    map written in key order) at d5e5f510a1b6b393f39a43293ccd9dc985defc79."""
    device = dcgm.Device(
        0, "GPU-x", H100, {"DCGM_FI_DEV_XID_ERRORS": 0}, [dcgm.Holder("default", "p", "cuda")]
    )
    text = dcgm.metrics_text([device], "n", dcgm.Release(driver_version="580.95.05"))
    assert text.splitlines()[2].endswith(
        'hostname="n",DCGM_FI_DRIVER_VERSION="580.95.05",container="cuda",err_code="0",'
        'err_msg="No Error",namespace="default",pod="p"} 0'
    )


def test_the_sandboxs_exporters_name_the_model_as_nvml_does():
    """modelName is the NVML name (`NVIDIA H100 80GB HBM3`, issue #490 above), not GFD's
    product label with its first dash made a space (`NVIDIA H100-80GB-HBM3`); a MIG slice's
    is its GPU's. gpuctl reads the model from it (the MIG geometry, prices)."""
    from gpuctl.sim import cluster
    from gpuctl.sim.sandbox import Api, Simulation

    nodes = cluster.node_objects(cluster.parse_nodes("1xH100-80GB,1xA100-80GB:mig=1g.10gb"))
    sim = Simulation(Api("http://unused"), nodes)
    gpu_nodes = [n for n in nodes if n["metadata"]["labels"].get("nvidia.com/gpu.present")]
    models = {d.model for node in gpu_nodes for d in sim.devices(node, [])}
    assert models == {H100, "NVIDIA A100-SXM4-80GB"}
