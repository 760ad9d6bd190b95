"""The fp8ref pytest plugin (fp8ref/pytest_plugin.py, entry point pytest11) provides --device, the device/seed
fixtures, spec grids and failure artifacts; pytester lets tests/test_engine_plugin.py run the plugin in a subsession.
Here: the fixture the cooperative jagged kernels' tests force their kernel and config with."""

import pytest

pytest_plugins = ("pytester",)


@pytest.fixture
def force_jagged_kernel(monkeypatch):
    """``force(kind, kernel_configs, config)``: the jagged ops launch kernel ``kind`` (fp8moe.configs.PER_GROUP_KERNEL)
    on every backend, and ``kernel_configs`` launches with ``config``. Launch plans are forgotten around it: no plan
    recorded under another config may replay inside the test."""
    from fp8moe import configs, replay

    def force(kind, kernel_configs, config):
        monkeypatch.setattr(configs, "PER_GROUP_KERNEL", dict.fromkeys(configs.PER_GROUP_KERNEL, kind))
        original = configs.KernelConfigs.fixed

        def fixed(self, backend, args):
            return config if self is kernel_configs else original(self, backend, args)

        monkeypatch.setattr(configs.KernelConfigs, "fixed", fixed)
        replay.forget()

    yield force
    replay.forget()
