"""A written certificate read back: it validates, and its HTML view shows the status and every finding."""

from __future__ import annotations

from pathlib import Path

from fp8ref.bringup.certificate import Certificate


def test_committed_certificates_load_and_render_as_html():
    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    for name in ("cpu-interpreter-certificate.json", "h200-certificate.json"):
        cert = Certificate.load(results / name)
        assert cert.status in ("pass", "pass_with_findings")
        html_view = cert._repr_html_()
        assert cert.status.upper() in html_view
        assert all(s["name"] in html_view for s in cert.steps("finding"))
        assert repr(cert).startswith("Certificate(")
