"""The fp8ref pytest plugin (fp8ref/pytest_plugin.py, entry point pytest11) provides --device, the device/seed
fixtures, spec grids and failure artifacts; pytester lets tests/test_engine_plugin.py run the plugin in a subsession."""

pytest_plugins = ("pytester",)
