"""Receiver security of `tracehound serve`: TLS on both receivers (`--tls-cert`/`--tls-key`) and
the bearer token (`TRACEHOUND_RECEIVER_TOKEN`), with the real OTel SDK exporters as clients
(their `credentials` / `certificate_file` and `headers`). The certificate is self-signed, made
with the `openssl` command for 127.0.0.1 and localhost."""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from _serve import Serve
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans
from opentelemetry.sdk.trace.export import SpanExportResult

from helpers import fixture_request, readable_spans_from_request
from tracehound.server._grpc import encode_health_request, parse_health_response
from tracehound.testing import OTLPSink

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]

TOKEN = "t0ken-for-tests"
QUICK = ["--quiet-period", "0.2", "--evaluators", "loops"]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key): a throw-away CA signs the server's."""
    where = tmp_path_factory.mktemp("tls")
    ca, ca_key = where / "ca.pem", where / "ca-key.pem"
    cert, key, csr = where / "cert.pem", where / "key.pem", where / "cert.csr"
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl(
        *("req", "-x509", *curve, "-days", "2", "-keyout", str(ca_key), "-out", str(ca)),
        *("-subj", "/CN=tracehound test CA"),
    )
    openssl("req", "-new", *curve, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    extensions = where / "ext.cnf"
    extensions.write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        "keyUsage=digitalSignature\nbasicConstraints=CA:FALSE\n"
    )
    openssl(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key)),
        *("-CAcreateserial", "-days", "2", "-out", str(cert), "-extfile", str(extensions)),
    )
    return ca, cert, key


@pytest.fixture
def sink() -> Iterator[OTLPSink]:
    with OTLPSink() as server:
        yield server


def spans_of(name: str) -> list:  # type: ignore[type-arg]
    return readable_spans_from_request(fixture_request(name))


def test_tls_and_token_with_the_sdk_exporters(
    sink: OTLPSink, certificate: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, cert, key = certificate
    # requests lets these variables override a session's `verify` (the exporter's
    # `certificate_file`): unset, as in a plain environment.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    serve = Serve.start(
        ["--forward", sink.url, "--tls-cert", str(cert), "--tls-key", str(key), *QUICK],
        env={"TRACEHOUND_RECEIVER_TOKEN": TOKEN},
    )
    grpc_port = serve.grpc.rsplit(":", 1)[1]
    https = "https://" + serve.http.removeprefix("http://")
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
    try:
        spans = spans_of("pydantic_ai_v6")
        # The right token over TLS, gRPC and HTTP: accepted and forwarded.
        good_grpc = GrpcSpans(
            endpoint=f"localhost:{grpc_port}",
            credentials=credentials,
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert good_grpc.export(spans[:3]) is SpanExportResult.SUCCESS
        good_http = HttpSpans(
            endpoint=https + "/v1/traces",
            certificate_file=str(ca),
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert good_http.export(spans[3:]) is SpanExportResult.SUCCESS
        wanted = {s.context.span_id.to_bytes(8, "big") for s in spans}
        assert sink.wait_for(lambda: wanted <= {bytes(s.span.span_id) for s in sink.spans()}, 20)
        # No token, a wrong one: refused (never retried), nothing forwarded.
        before = len(sink.spans())
        no_token = GrpcSpans(endpoint=f"localhost:{grpc_port}", credentials=credentials, timeout=5)
        assert no_token.export(spans) is SpanExportResult.FAILURE
        wrong = HttpSpans(
            endpoint=https + "/v1/traces",
            certificate_file=str(ca),
            headers={"Authorization": "Bearer guess"},
            timeout=5,
        )
        assert wrong.export(spans) is SpanExportResult.FAILURE
        # Plaintext to a TLS receiver fails too.
        plain = GrpcSpans(
            endpoint=serve.grpc,
            insecure=True,
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=3,
        )
        assert plain.export(spans) is SpanExportResult.FAILURE
        # Health stays open (kubelet probes carry no token), over TLS.
        with grpc.secure_channel(f"localhost:{grpc_port}", credentials) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            assert parse_health_response(check(encode_health_request(""), timeout=5)) == 1
        context = ssl.create_default_context(cafile=str(ca))
        host, port = serve.http.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=5)
        conn.request("GET", "/readyz")
        assert conn.getresponse().status == 200
        conn.close()
        for exporter in (good_grpc, good_http, no_token, wrong, plain):
            exporter.shutdown()
    finally:
        assert serve.stop() == 0
    assert len(sink.spans()) == before
    assert serve.stopped_record()["spans_accepted"] == len(spans)


def test_http_token_refusal_is_401_and_counted(sink: OTLPSink) -> None:
    serve = Serve.start(
        ["--forward", sink.url, "--prometheus", "127.0.0.1:0", *QUICK],
        env={"TRACEHOUND_RECEIVER_TOKEN": TOKEN},
    )
    try:
        host, port = serve.http.removeprefix("http://").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        body = fixture_request("pydantic_ai_v6").SerializeToString()
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        response = conn.getresponse()
        response.read()
        assert response.status == 401
        assert response.getheader("WWW-Authenticate", "").startswith("Bearer")
        conn.close()
        phost, pport = str(serve.listening["prometheus"]).rsplit(":", 1)
        metrics = http.client.HTTPConnection(phost, int(pport), timeout=5)
        metrics.request("GET", "/metrics")
        text = metrics.getresponse().read().decode()
        metrics.close()
        assert any(
            "unauthenticated" in line and line.startswith("tracehound_server_requests_total")
            for line in text.splitlines()
        ), text
    finally:
        assert serve.stop() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "CERT"], "tls_cert (from flag --tls-cert) needs tls_key as well"),
        (
            ["--tls-cert", "CERT", "--tls-key", "/no/such/key.pem"],
            "tls_key (from flag --tls-key): cannot read /no/such/key.pem: No such file",
        ),
        (
            ["--tls-cert", "KEY", "--tls-key", "KEY"],
            "is not a PEM certificate and its key",
        ),
    ],
)
def test_bad_tls_settings_fail_at_start_up(
    certificate: tuple[Path, Path, Path], args: list[str], message: str, tmp_path: Path
) -> None:
    from test_serve_startup import serve

    _, cert, key = certificate
    args = [a.replace("CERT", str(cert)).replace("KEY", str(key)) for a in args]
    for check in ([], ["--check-config"]):
        code, stderr, _ = serve(
            ["--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0", *args, *check],
            tmp_path,
        )
        assert code == 2, stderr
        (line,) = stderr.splitlines()
        assert message in line
