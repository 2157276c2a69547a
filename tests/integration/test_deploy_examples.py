"""The deployment examples in `deploy/`, validated offline, and the trace affinity they rely on.

Nothing here runs a container engine, a cluster or an otelcol binary (none exists on the project
machines). What is checked instead:

- every YAML file parses (`yaml.safe_load_all`) and passes `yamllint` with its `relaxed` rules;
- every Kubernetes manifest passes `kubernetes-validate` for 1.33 in strict mode (core kinds only:
  a kind without a schema fails), and the validator is shown to reject a broken manifest;
- the properties that matter, by assertion: the gateway routes traces and logs with
  `load_balancing` + `routing_key: traceID` to exactly the tracehound replicas (compose: static
  list; Kubernetes: dns on the headless Service), every tracehound container binds 0.0.0.0:4317
  and 0.0.0.0:4318 and keeps its baselines in Redis, uses only flags `tracehound serve --help`
  lists and variables `tracehound serve` reads (and `--check-config` accepts each container's
  arguments and environment against a real Redis), Services target real container ports, probes
  and the compose health check hit endpoints a live `tracehound serve` answers;
- end to end: a Python stand-in for the gateway's `load_balancing` exporter (the same consistent
  hash ring of trace ids) in front of two real `tracehound serve` replicas sharing one Redis:
  spans of several agent traces, each trace split over several export requests, are evaluated
  whole by exactly one replica each, and both replicas learn one shared baseline.
"""

from __future__ import annotations

import base64
import bisect
import copy
import http.client
import json
import os
import random
import re
import shlex
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
import kubernetes_validate
import pytest
import yaml
from _serve import Serve
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.util.re import parse_env_headers
from yamllint import linter
from yamllint.config import YamlLintConfig

from tracehound import names
from tracehound.baselines import RedisStore
from tracehound.cli import build_parser
from tracehound.server._grpc import SERVING, encode_health_request, parse_health_response
from tracehound.server._settings import (
    SETTINGS,
    TRACEHOUND_CONFIG,
    TRACEHOUND_REDIS_URL,
    Address,
    ServeSettings,
)
from tracehound.testing import OTLPSink

UNIT_TESTS = Path(__file__).resolve().parents[1] / "unit"
if str(UNIT_TESTS) not in sys.path:
    sys.path.insert(0, str(UNIT_TESTS))

from _drift_scenarios import SCENARIOS, scenario_documents  # noqa: E402

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
K8S_VERSION = "1.33.0"
TRACEHOUND_IMAGE = "tracehound:latest"
ALL_INTERFACES_GRPC = Address("0.0.0.0", 4317)
ALL_INTERFACES_HTTP = Address("0.0.0.0", 4318)
PROBE_PATHS = {"/healthz", "/readyz"}  # tracehound's HTTP health endpoints (README, _http.py)
# What compose interpolates `${BACKEND_OTLP_ENDPOINT:?…}` with in these tests.
COMPOSE_ENV = {
    "BACKEND_OTLP_ENDPOINT": "http://backend.example:4317",
    "TRACEHOUND_RECEIVER_TOKEN": "token-from-the-environment",
}
# The standard OTel SDK variables `tracehound serve` reads besides its own (`--help` epilog,
# `_settings._signal_target`, `_telemetry.make_meter_provider`).
_OTLP_OPTIONS = (
    "ENDPOINT",
    "PROTOCOL",
    "HEADERS",
    "COMPRESSION",
    "TIMEOUT",
    "INSECURE",
    "CERTIFICATE",
    "CLIENT_KEY",
    "CLIENT_CERTIFICATE",
)
OTEL_VARIABLES = frozenset(
    f"OTEL_EXPORTER_OTLP_{signal}{option}"
    for signal in ("", "TRACES_", "LOGS_", "METRICS_")
    for option in _OTLP_OPTIONS
) | {"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_METRIC_EXPORT_INTERVAL"}
TRACEHOUND_VARIABLES = frozenset(
    name for spec in SETTINGS for name in (spec.env, *spec.fallback_env) if name
) | {TRACEHOUND_CONFIG}

EXPECTED_FILES = {
    "Dockerfile",
    "README.md",
    "compose.yaml",
    "gateway/collector.yaml",
    "gateway/collector-compose.yaml",
    "k8s/namespace.yaml",
    "k8s/tracehound-headless-service.yaml",
    "k8s/tracehound-statefulset.yaml",
    "k8s/tracehound-pdb.yaml",
    "k8s/gateway-configmap.yaml",
    "k8s/gateway-deployment.yaml",
    "k8s/gateway-service.yaml",
    "k8s/gateway-rbac.yaml",
    "k8s/redis.yaml",
    "k8s/sidecar-pod.yaml",
}


# --- reading the examples ------------------------------------------------------------------------


def documents(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))


def k8s_documents() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in sorted(K8S.glob("*.yaml")) for doc in documents(path)]


def k8s_objects(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in k8s_documents() if doc["kind"] == kind]


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    (found,) = [doc for doc in k8s_objects(kind) if doc["metadata"]["name"] == name]
    return found


def compose() -> dict[str, Any]:
    (document,) = documents(DEPLOY / "compose.yaml")
    assert isinstance(document, dict)
    return document


def collector(name: str) -> dict[str, Any]:
    (document,) = documents(DEPLOY / "gateway" / name)
    assert isinstance(document, dict)
    return document


_INTERPOLATION = re.compile(
    r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
)


def interpolate(value: str, environ: Mapping[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}` (what the examples use)."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        current = environ.get(name)
        if op in (":-", "-"):
            return current if current else arg
        if op in (":?", "?") and not current:
            raise ValueError(f"{name} is required: {arg}")
        if current is None:
            raise ValueError(f"{name} is not set and has no default")
        return current

    return _INTERPOLATION.sub(one, value)


POD_KINDS = {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def pod_spec(doc: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
    return spec


def pod_labels(doc: Mapping[str, Any]) -> dict[str, str]:
    meta = doc["metadata"] if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]
    return dict(meta.get("labels", {}))


def pod_containers(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(doc)
    return [*spec.get("initContainers", []), *spec["containers"]]


def secret_value(namespace: str, name: str, key: str) -> str:
    for secret in k8s_objects("Secret"):
        meta = secret["metadata"]
        if meta["name"] == name and meta.get("namespace") == namespace:
            if key in secret.get("stringData", {}):
                return str(secret["stringData"][key])
            return base64.b64decode(secret["data"][key]).decode()
    raise AssertionError(f"no Secret {namespace}/{name} with key {key!r} in deploy/k8s")


def k8s_environment(container: Mapping[str, Any], namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet would set it: Secret references resolved from
    the Secrets in deploy/k8s, field references as placeholders, `$(VAR)` expanded."""
    environ: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            value = re.sub(
                r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                lambda m: environ.get(m[1], m[0]),
                str(item["value"]),
            )
        elif "secretKeyRef" in item.get("valueFrom", {}):
            ref = item["valueFrom"]["secretKeyRef"]
            value = secret_value(namespace, ref["name"], ref["key"])
        elif "fieldRef" in item.get("valueFrom", {}):
            value = f"<{item['valueFrom']['fieldRef']['fieldPath']}>"
        else:
            raise AssertionError(f"unsupported env source in the examples: {item}")
        environ[item["name"]] = value
    return environ


@dataclass
class Container:
    """One tracehound container of the examples, with what `tracehound serve` would see."""

    where: str
    args: list[str]
    env: dict[str, str]
    raw_env: dict[str, str]
    """As written (before `$(VAR)` expansion and Secret look-ups)."""
    ports: dict[str, int] = field(default_factory=dict)
    """Kubernetes: port name → containerPort."""
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    healthcheck: list[str] | None = None
    """compose: the health check command (CMD form)."""


def tracehound_containers() -> list[Container]:
    found = []
    for name, service in compose()["services"].items():
        if service.get("image") != TRACEHOUND_IMAGE:
            continue
        environment = service.get("environment", {})
        assert isinstance(environment, dict), "compose environment: use the mapping form"
        found.append(
            Container(
                where=f"compose.yaml service {name}",
                args=[str(a) for a in service.get("command", [])],
                env={k: interpolate(str(v), COMPOSE_ENV) for k, v in environment.items()},
                raw_env={k: str(v) for k, v in environment.items()},
                healthcheck=[str(t) for t in service["healthcheck"]["test"]],
            )
        )
    for path, doc in k8s_documents():
        if doc["kind"] not in POD_KINDS:
            continue
        for container in pod_containers(doc):
            if container["image"] != TRACEHOUND_IMAGE:
                continue
            found.append(
                Container(
                    where=f"{path.name} {doc['kind']}/{doc['metadata']['name']}",
                    args=[str(a) for a in container.get("args", [])],
                    env=k8s_environment(container, doc["metadata"].get("namespace", "default")),
                    raw_env={e["name"]: str(e.get("value", "")) for e in container.get("env", [])},
                    ports={p["name"]: p["containerPort"] for p in container.get("ports", [])},
                    probes={
                        kind: container[kind]
                        for kind in ("startupProbe", "readinessProbe", "livenessProbe")
                        if kind in container
                    },
                )
            )
    return found


def resolve(container: Container) -> ServeSettings:
    """The settings `tracehound serve ARGS` resolves in the container's environment (the image's
    entrypoint is `tracehound serve`), parsed by tracehound's own argument parser."""
    namespace = build_parser().parse_args(["serve", *container.args])
    flags = {spec.name: getattr(namespace, spec.name, None) for spec in SETTINGS if spec.flag}
    return ServeSettings.resolve(flags, container.env, namespace.config)


def test_the_examples_are_all_there() -> None:
    present = {str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*") if p.is_file()}
    assert present >= EXPECTED_FILES
    containers = tracehound_containers()
    assert sorted(c.where for c in containers) == [
        "compose.yaml service tracehound-1",
        "compose.yaml service tracehound-2",
        "compose.yaml service tracehound-3",
        "sidecar-pod.yaml Pod/agent-app",
        "tracehound-statefulset.yaml StatefulSet/tracehound",
    ]


# --- schema validators ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses_and_passes_yamllint_relaxed(path: Path) -> None:
    assert documents(path), "empty YAML file"
    problems = list(linter.run(path.read_text(), YamlLintConfig("extends: relaxed"), str(path)))
    assert [f"{p.line}:{p.column} {p.level} {p.message} ({p.rule})" for p in problems] == []


def test_yamllint_reports_what_it_should() -> None:
    """The linter configuration is live: a duplicated key is an error, a long line a warning."""
    text = "a: 1\na: 2\nb: " + " ".join(["words"] * 20) + "\n"
    problems = list(linter.run(text, YamlLintConfig("extends: relaxed")))
    assert {(p.rule, p.level) for p in problems} == {
        ("key-duplicates", "error"),
        ("line-length", "warning"),
    }


@pytest.mark.parametrize("path", sorted(K8S.glob("*.yaml")), ids=lambda p: p.name)
def test_kubernetes_manifests_are_valid_for_1_33_strict(path: Path) -> None:
    for doc in documents(path):
        # SchemaNotFoundError (a kind that is not core) fails the test too: the CLI only warns.
        version = kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        assert version == "1.33"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["startupProbe"]["grpc"].update(port="otlp-grpc"), "is not of type 'integer'"),
        (lambda c: c.update(args="--otlp-grpc 0.0.0.0:4317"), "is not of type 'array'"),
        (lambda c: c["ports"][0].update(port=4317), "Additional properties are not allowed"),
    ],
    ids=["grpc-probe-port-by-name", "args-as-a-string", "unknown-field"],
)
def test_the_kubernetes_schema_rejects_a_broken_manifest(change: Any, message: str) -> None:
    (pod,) = documents(K8S / "sidecar-pod.yaml")[:1]
    broken = copy.deepcopy(pod)
    change(broken["spec"]["initContainers"][0])
    with pytest.raises(kubernetes_validate.ValidationError, match=message):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


# --- the gateway --------------------------------------------------------------------------------


def referenced(config: Mapping[str, Any], section: str) -> set[str]:
    pipelines = config["service"]["pipelines"].values()
    return {name for pipeline in pipelines for name in pipeline.get(section, [])}


@pytest.mark.parametrize("name", ["collector.yaml", "collector-compose.yaml"])
def test_the_gateway_routes_traces_and_logs_by_trace_id(name: str) -> None:
    config = collector(name)
    text = (DEPLOY / "gateway" / name).read_text()
    assert "`loadbalancing`" in text and "v0.153.0" in text  # the older collectors' name
    exporter = config["exporters"]["load_balancing"]
    assert "loadbalancing" not in config["exporters"]
    assert exporter["routing_key"] == "traceID"
    otlp = exporter["protocol"]["otlp"]
    assert "endpoint" not in otlp  # filled in per backend by the exporter
    assert otlp["tls"] == {"insecure": True}  # tracehound's receivers are plaintext
    assert re.fullmatch(r"\d+(ms|s)", otlp["timeout"])
    assert len(exporter["resolver"]) == 1, "configure exactly one resolver"

    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "logs", "metrics"}
    for signal in ("traces", "logs"):  # GenAI log events must meet their spans
        assert pipelines[signal]["exporters"] == ["load_balancing"]
    assert "load_balancing" not in pipelines["metrics"]["exporters"]  # never traceID for metrics
    for pipeline in pipelines.values():
        assert pipeline["receivers"] == ["otlp"]
        assert pipeline["processors"][0] == "memory_limiter"
    for section in ("receivers", "processors", "exporters"):
        assert referenced(config, section) == set(config[section]), section

    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    assert config["extensions"]["health_check"]["endpoint"] == "0.0.0.0:13133"
    assert config["service"]["extensions"] == ["health_check"]
    backend = config["exporters"]["otlp_grpc/backend"]["endpoint"]
    assert backend == "${env:BACKEND_OTLP_ENDPOINT}"


def without_resolver(config: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(config)
    del stripped["exporters"]["load_balancing"]["resolver"]
    return stripped


def test_the_gateway_variants_differ_only_in_their_resolver() -> None:
    kubernetes, compose_variant = collector("collector.yaml"), collector("collector-compose.yaml")
    assert without_resolver(kubernetes) == without_resolver(compose_variant)

    (dns,) = kubernetes["exporters"]["load_balancing"]["resolver"].values()
    assert list(kubernetes["exporters"]["load_balancing"]["resolver"]) == ["dns"]
    headless = k8s_object("Service", "tracehound-headless")
    meta = headless["metadata"]
    assert dns["hostname"] == f"{meta['name']}.{meta['namespace']}.svc.cluster.local"
    (grpc_port,) = headless["spec"]["ports"]
    assert dns["port"] == grpc_port["port"] == ALL_INTERFACES_GRPC.port

    resolver = compose_variant["exporters"]["load_balancing"]["resolver"]
    assert list(resolver) == ["static"]
    replicas = [
        name
        for name, service in compose()["services"].items()
        if service.get("image") == TRACEHOUND_IMAGE
    ]
    assert len(replicas) == 3
    assert resolver["static"]["hostnames"] == [f"{n}:{ALL_INTERFACES_GRPC.port}" for n in replicas]


def test_the_configmap_embeds_collector_yaml_and_the_gateway_loads_it() -> None:
    configmap = k8s_object("ConfigMap", "otelcol-gateway")
    assert (
        configmap["data"]["collector.yaml"] == (DEPLOY / "gateway" / "collector.yaml").read_text()
    )

    deployment = k8s_object("Deployment", "otelcol-gateway")
    spec = pod_spec(deployment)
    (container,) = spec["containers"]
    assert container["image"].startswith("otel/opentelemetry-collector-contrib:")
    (config_arg,) = [a for a in container["args"] if a.startswith("--config=")]
    config_path = Path(config_arg.removeprefix("--config="))
    (mount,) = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == config_path.parent]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    assert [i["path"] for i in volume["configMap"]["items"]] == [config_path.name]
    assert [i["key"] for i in volume["configMap"]["items"]] == ["collector.yaml"]
    env = {e["name"] for e in container["env"]}
    assert "BACKEND_OTLP_ENDPOINT" in env  # ${env:BACKEND_OTLP_ENDPOINT} in the config

    config = collector("collector.yaml")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    health_port = int(config["extensions"]["health_check"]["endpoint"].rsplit(":", 1)[1])
    for probe in ("livenessProbe", "readinessProbe"):
        action = container[probe]["httpGet"]
        assert action["path"] == config["extensions"]["health_check"].get("path", "/")
        assert ports[action["port"]] == health_port
    protocols = config["receivers"]["otlp"]["protocols"]
    for protocol in ("grpc", "http"):
        assert int(protocols[protocol]["endpoint"].rsplit(":", 1)[1]) in ports.values()
    assert (
        spec["serviceAccountName"]
        == k8s_object("ServiceAccount", "otelcol-gateway")["metadata"]["name"]
    )


def test_the_rbac_grants_what_the_k8s_resolver_needs() -> None:
    role = k8s_object("Role", "otelcol-gateway-endpointslices")
    (rule,) = role["rules"]
    assert rule == {
        "apiGroups": ["discovery.k8s.io"],
        "resources": ["endpointslices"],
        "verbs": ["get", "list", "watch"],
    }
    binding = k8s_object("RoleBinding", "otelcol-gateway-endpointslices")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    assert (subject["kind"], subject["name"]) == ("ServiceAccount", "otelcol-gateway")
    # the commented-out k8s resolver names the same headless Service
    text = (DEPLOY / "gateway" / "collector.yaml").read_text()
    assert "#   service: tracehound-headless.observability" in text


# --- the tracehound containers -------------------------------------------------------------------


@pytest.fixture(scope="module")
def serve_help() -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tracehound.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_flags_and_variables_are_ones_tracehound_serve_accepts(serve_help: str) -> None:
    accepted = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", serve_help))
    assert {"--otlp-grpc", "--otlp-http", "--prometheus", "--baselines"} <= accepted
    assert TRACEHOUND_REDIS_URL in TRACEHOUND_VARIABLES
    for container in tracehound_containers():
        assert container.args, container.where
        assert container.args[0] != "serve", "the image's entrypoint is already `tracehound serve`"
        flags = [a.split("=", 1)[0] for a in container.args if a.startswith("--")]
        assert set(flags) <= accepted, (container.where, set(flags) - accepted)
        for name, value in container.env.items():
            if name.startswith("TRACEHOUND_"):
                assert name in TRACEHOUND_VARIABLES, (container.where, name)
            elif name.startswith("OTEL_"):
                assert name in OTEL_VARIABLES, (container.where, name)
            else:  # only as a $(NAME) source for another variable
                assert any(f"$({name})" in v for v in container.raw_env.values()), (
                    container.where,
                    name,
                    value,
                )


def test_every_tracehound_container_listens_everywhere_and_shares_redis() -> None:
    for container in tracehound_containers():
        settings = resolve(container)
        assert settings.otlp_grpc == ALL_INTERFACES_GRPC, container.where
        assert settings.otlp_http == ALL_INTERFACES_HTTP, container.where
        assert settings.sources["otlp_grpc"] == "flag --otlp-grpc"
        assert settings.sources["otlp_http"] == "flag --otlp-http"
        assert settings.baselines is not None
        assert urlsplit(settings.baselines).scheme in ("redis", "rediss"), container.where
        assert settings.sources["baselines"] == f"env {TRACEHOUND_REDIS_URL}"
        assert settings.prometheus == Address("0.0.0.0", 9464), container.where
        assert settings.forward.kind == "otlp", container.where  # to the backend
        assert settings.sources["forward"] == "env OTEL_EXPORTER_OTLP_ENDPOINT"
        for target in settings.forward.signals.values():
            assert not target.endpoint.startswith(("127.", "localhost")), container.where


def test_receivers_beyond_loopback_require_the_token_their_clients_send() -> None:
    """Every tracehound container binds 0.0.0.0, so each requires a bearer token, and whatever
    exports to it (the sidecar's app, the gateway) sends that same token."""
    for container in tracehound_containers():
        settings = resolve(container)
        assert settings.receiver_token, container.where
        assert settings.sources["receiver_token"] == "env TRACEHOUND_RECEIVER_TOKEN"
    pod = k8s_object("Pod", "agent-app")
    (app,) = pod["spec"]["containers"]
    app_env = {e["name"]: e for e in app["env"]}
    (sidecar,) = pod["spec"]["initContainers"]
    sidecar_env = {e["name"]: e for e in sidecar["env"]}
    ref = sidecar_env["TRACEHOUND_RECEIVER_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert app_env["TRACEHOUND_TOKEN"]["valueFrom"]["secretKeyRef"] == ref
    headers = parse_env_headers(
        app_env["OTEL_EXPORTER_OTLP_HEADERS"]["value"].replace("$(TRACEHOUND_TOKEN)", "abc"),
        liberal=True,
    )
    assert headers == {"authorization": "Bearer abc"}  # as the OTel SDK reads the variable
    gateway = k8s_object("Deployment", "otelcol-gateway")
    (collector,) = gateway["spec"]["template"]["spec"]["containers"]
    gateway_env = {e["name"]: e for e in collector["env"]}
    assert "TRACEHOUND_RECEIVER_TOKEN" in gateway_env
    assert compose()["services"]["gateway"]["environment"]["TRACEHOUND_RECEIVER_TOKEN"]
    for name in ("collector.yaml", "collector-compose.yaml"):
        config = yaml.safe_load((DEPLOY / "gateway" / name).read_text())
        otlp = config["exporters"]["load_balancing"]["protocol"]["otlp"]
        assert otlp["headers"] == {"authorization": "Bearer ${env:TRACEHOUND_RECEIVER_TOKEN}"}


def test_the_compose_replicas_are_identical() -> None:
    services = compose()["services"]
    replicas = [s for s in services.values() if s.get("image") == TRACEHOUND_IMAGE]
    assert len(replicas) == 3 and all(r == replicas[0] for r in replicas[1:])


def check_config(container: Container, redis_url: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACEHOUND_"))}
    environ.update(container.env)
    environ[TRACEHOUND_REDIS_URL] = redis_url  # the example's Redis host does not exist here
    return subprocess.run(
        [sys.executable, "-m", "tracehound.cli", "serve", "--check-config", *container.args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )


def test_check_config_accepts_every_tracehound_container(redis_url: str) -> None:
    """`tracehound serve --check-config`, with each container's arguments and environment (its
    Redis URL pointed at the test's Redis, since `--check-config` connects to it)."""
    seen = set()
    for container in tracehound_containers():
        key = (tuple(container.args), tuple(sorted(container.env.items())))
        if key in seen:
            continue
        seen.add(key)
        result = check_config(container, redis_url)
        assert result.returncode == 0, (container.where, result.stderr)
        rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
        assert "0.0.0.0:4317    [flag --otlp-grpc]" in rows["otlp_grpc"], container.where
        assert "0.0.0.0:4318    [flag --otlp-http]" in rows["otlp_http"], container.where
        assert f"[env {TRACEHOUND_REDIS_URL}]" in rows["baselines"], container.where
        assert "(Redis, reachable)" in result.stdout
        assert "configuration OK" in result.stdout
    assert len(seen) == 3  # compose (three identical replicas), StatefulSet, sidecar


# --- Kubernetes wiring ---------------------------------------------------------------------------


def selected_workloads(service: Mapping[str, Any]) -> list[dict[str, Any]]:
    namespace = service["metadata"].get("namespace", "default")
    selector = service["spec"]["selector"]
    return [
        doc
        for _, doc in k8s_documents()
        if doc["kind"] in POD_KINDS
        and doc["metadata"].get("namespace", "default") == namespace
        and selector.items() <= pod_labels(doc).items()
    ]


def test_services_select_pods_and_target_their_container_ports() -> None:
    services = k8s_objects("Service")
    assert {s["metadata"]["name"] for s in services} == {
        "tracehound-headless",
        "otelcol-gateway",
        "redis",
    }
    for service in services:
        workloads = selected_workloads(service)
        assert len(workloads) == 1, service["metadata"]["name"]
        (workload,) = workloads
        ports = [p for c in pod_containers(workload) for p in c.get("ports", [])]
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            (matched,) = [p for p in ports if target in (p.get("name"), p["containerPort"])]
            assert matched["containerPort"] == port["port"], (service["metadata"]["name"], port)

    headless = k8s_object("Service", "tracehound-headless")
    assert headless["spec"]["clusterIP"] == "None"
    statefulset = k8s_object("StatefulSet", "tracehound")
    assert selected_workloads(headless) == [statefulset]
    assert statefulset["spec"]["serviceName"] == headless["metadata"]["name"]
    assert statefulset["spec"]["replicas"] >= 2
    assert statefulset["spec"]["selector"]["matchLabels"].items() <= pod_labels(statefulset).items()

    pdb = k8s_object("PodDisruptionBudget", "tracehound")
    assert pdb["spec"]["selector"]["matchLabels"] == statefulset["spec"]["selector"]["matchLabels"]
    assert pdb["metadata"]["namespace"] == statefulset["metadata"]["namespace"]

    gateway = k8s_object("Service", "otelcol-gateway")
    assert "clusterIP" not in gateway["spec"]  # an ordinary Service: the gateway is stateless
    assert selected_workloads(gateway) == [k8s_object("Deployment", "otelcol-gateway")]


def test_the_redis_url_points_at_the_redis_service() -> None:
    redis_service = k8s_object("Service", "redis")
    meta = redis_service["metadata"]
    (port,) = redis_service["spec"]["ports"]
    for secret in k8s_objects("Secret"):
        if secret["metadata"]["name"] != "tracehound-redis":
            continue
        url = urlsplit(secret["stringData"]["url"])
        assert url.scheme == "redis"
        assert url.hostname == f"{meta['name']}.{meta['namespace']}.svc.cluster.local"
        assert url.port == port["port"]
    text = (K8S / "redis.yaml").read_text()
    assert "production" in text and "managed or replicated Redis" in text


def test_namespaces_exist_for_every_object() -> None:
    declared = {ns["metadata"]["name"] for ns in k8s_objects("Namespace")} | {"default"}
    for path, doc in k8s_documents():
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace", "default") in declared, path.name


def test_the_sidecar_is_a_native_sidecar_the_app_exports_to() -> None:
    pod = k8s_object("Pod", "agent-app")
    spec = pod_spec(pod)
    (sidecar,) = spec["initContainers"]
    assert sidecar["image"] == TRACEHOUND_IMAGE
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar, not a run-once init container
    assert "startupProbe" in sidecar  # the app starts once the receiver answers
    assert all(c["image"] != TRACEHOUND_IMAGE for c in spec["containers"])
    (app,) = spec["containers"]
    endpoint = urlsplit(
        {e["name"]: e.get("value") for e in app["env"]}["OTEL_EXPORTER_OTLP_ENDPOINT"]
    )
    (container,) = [c for c in tracehound_containers() if c.where.startswith("sidecar-pod.yaml")]
    settings = resolve(container)
    assert (endpoint.hostname, endpoint.port) == ("127.0.0.1", settings.otlp_grpc.port)


def test_probes_are_tracehound_endpoints_on_its_ports() -> None:
    kinds_seen = set()
    for container in tracehound_containers():
        if container.healthcheck is not None:  # compose
            command = " ".join(container.healthcheck)
            assert container.healthcheck[0] == "CMD"
            (url,) = re.findall(r"http://[^'\"\s]+", command)
            parts = urlsplit(url)
            assert parts.path in PROBE_PATHS and parts.port == resolve(container).otlp_http.port
            kinds_seen.add("compose")
            continue
        settings = resolve(container)
        assert {"startupProbe", "livenessProbe"} <= set(container.probes), container.where
        # a native sidecar's readiness is its pod's: a busy sidecar must not unready the app
        sidecar = container.where.startswith("sidecar-pod.yaml")
        assert ("readinessProbe" in container.probes) is not sidecar, container.where
        for kind, probe in container.probes.items():
            if "grpc" in probe:
                assert probe["grpc"]["port"] == settings.otlp_grpc.port, (container.where, kind)
                assert probe["grpc"].get("service", "") == ""  # the whole server
                kinds_seen.add("grpc")
            else:
                action = probe["httpGet"]
                assert action["path"] in PROBE_PATHS, (container.where, kind)
                port = action["port"]
                port = container.ports[port] if isinstance(port, str) else port
                assert port == settings.otlp_http.port, (container.where, kind)
                kinds_seen.add(action["path"])
    assert kinds_seen == {"compose", "grpc", "/healthz", "/readyz"}


def test_the_probes_answer_on_a_live_tracehound_serve() -> None:
    """The endpoints the probes and the compose health check use, asked of a real `tracehound
    serve`: HTTP 200, gRPC health SERVING, the compose command exits 0 (and a wrong path, 404,
    would not do)."""
    http_paths = set()
    grpc_services = set()
    healthchecks = []
    for container in tracehound_containers():
        if container.healthcheck is not None:
            healthchecks.append(container.healthcheck)
        for probe in container.probes.values():
            if "grpc" in probe:
                grpc_services.add(probe["grpc"].get("service", ""))
            else:
                http_paths.add(probe["httpGet"]["path"])
    assert http_paths == PROBE_PATHS and grpc_services == {""}
    serve = Serve.start(["--forward", "none", "--baselines", "memory"])
    try:
        host, port = serve.http.removeprefix("http://").rsplit(":", 1)
        for path in [*sorted(http_paths), "/nope"]:
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
            finally:
                conn.close()
            assert response.status == (404 if path == "/nope" else 200), path
        with grpc.insecure_channel(serve.grpc) as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check")
            for service in grpc_services:
                reply = check(encode_health_request(service), timeout=10)
                assert parse_health_response(reply) == SERVING
        for command in {tuple(h) for h in healthchecks}:
            argv = [sys.executable if a == "python" else a for a in command[1:]]
            argv = [a.replace("127.0.0.1:4318", f"{host}:{port}") for a in argv]
            assert subprocess.run(argv, timeout=30, check=False).returncode == 0, command
            broken = [a.replace("/readyz", "/nope") for a in argv]
            assert (
                subprocess.run(broken, timeout=30, capture_output=True, check=False).returncode != 0
            )
    finally:
        assert serve.stop() == 0


# --- compose wiring ------------------------------------------------------------------------------


def test_compose_services_wire_up() -> None:
    document = compose()
    services = document["services"]
    assert "version" not in document  # the Compose Specification, no legacy version key
    replicas = {n for n, s in services.items() if s.get("image") == TRACEHOUND_IMAGE}
    redis = services["redis"]
    assert redis["image"].startswith("redis:")
    assert redis["healthcheck"]["test"][:2] == ["CMD", "redis-cli"]
    for name in replicas:
        service = services[name]
        url = urlsplit(service["environment"][TRACEHOUND_REDIS_URL])
        assert (url.scheme, url.hostname, url.port, url.path) == ("redis", "redis", 6379, "/0")
        assert service["depends_on"] == {"redis": {"condition": "service_healthy"}}
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
        assert (DEPLOY / service["build"]["context"]).resolve() == ROOT
        assert {str(p) for p in service["expose"]} == {"4317", "4318", "9464"}
        assert "ports" not in service  # reached through the gateway only
        assert service["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith(
            "${BACKEND_OTLP_ENDPOINT:?"
        )
        with pytest.raises(ValueError, match="BACKEND_OTLP_ENDPOINT is required"):
            interpolate(service["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"], {})
        grace = int(str(service["stop_grace_period"]).removesuffix("s"))
        assert grace > resolve(next(iter(tracehound_containers()))).shutdown_timeout

    gateway = services["gateway"]
    assert gateway["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert gateway["depends_on"] == {n: {"condition": "service_healthy"} for n in sorted(replicas)}
    (volume,) = gateway["volumes"]
    source, target, mode = volume.split(":")
    assert (DEPLOY / source).resolve() == DEPLOY / "gateway" / "collector-compose.yaml"
    assert mode == "ro"
    assert gateway["command"] == [f"--config={target}"]
    published = {p.split(":")[1].split()[0] for p in map(str, gateway["ports"])}
    assert {"4317", "4318", "13133"} <= published
    assert gateway["environment"]["BACKEND_OTLP_ENDPOINT"].startswith("${BACKEND_OTLP_ENDPOINT:?")


# --- the Dockerfile -------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), rest.strip()))
    return out


def test_the_dockerfile_builds_the_placeholder_image_from_the_source_tree() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.10 only
        import tomli as tomllib

    instructions = dockerfile_instructions()
    froms = [rest for instruction, rest in instructions if instruction == "FROM"]
    assert froms == ["python:3.11-slim AS build", "python:3.11-slim"]
    copied = []
    for instruction, rest in instructions:
        if instruction == "COPY" and not rest.startswith("--from="):
            *sources, _destination = shlex.split(rest)
            copied += sources
    for source in copied:  # relative to the build context, the repository root
        assert (ROOT / source).exists(), source
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # setup.py declares the C accelerator: without it the wheel would be pure Python
    assert {"pyproject.toml", "setup.py", project["readme"], "src"} <= set(copied)
    apt_run, build_run, run = [rest for instruction, rest in instructions if instruction == "RUN"]
    assert "apt-get install" in apt_run and "gcc" in apt_run
    assert re.search(r"pip wheel [^&]*--wheel-dir /wheels /tmp/tracehound", build_run)
    assert ("COPY", "--from=build /wheels /wheels") in instructions
    assert re.search(r'pip install [^&]*"\$\(ls /wheels/tracehound-\*\.whl\)\[redis\]"', run)
    assert (
        "redis"
        in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    (entrypoint,) = [rest for instruction, rest in instructions if instruction == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["tracehound", "serve"]
    (expose,) = [rest for instruction, rest in instructions if instruction == "EXPOSE"]
    assert set(expose.split()) == {"4317", "4318", "9464"}
    (user,) = [rest for instruction, rest in instructions if instruction == "USER"]
    for _, doc in k8s_documents():  # the manifests' runAsUser is the image's user
        if doc["kind"] in POD_KINDS:
            for container in pod_containers(doc):
                if container["image"] == TRACEHOUND_IMAGE:
                    context = {
                        **pod_spec(doc).get("securityContext", {}),
                        **container.get("securityContext", {}),
                    }
                    assert str(context["runAsUser"]) == user


def test_the_deploy_readme_explains_every_file_and_what_was_not_run() -> None:
    text = (DEPLOY / "README.md").read_text()
    for name in EXPECTED_FILES - {"README.md"}:
        assert f"`{name}`" in text, name
    for phrase in ("load_balancing", "routing_key: traceID", "kubernetes-validate", "yamllint"):
        assert phrase in text, phrase
    assert re.search(r"not run|never ran|were not run", text)
    readme = (ROOT / "README.md").read_text()
    assert "(deploy/README.md)" in readme


# --- trace affinity, end to end -----------------------------------------------------------------

RING_POSITIONS = 36_000  # the load_balancing exporter's ring: 360 degrees, two decimals
POINTS_PER_BACKEND = 100


class TraceIdRing:
    """The consistent hash ring of the Collector's `load_balancing` exporter (contrib
    `exporter/loadbalancingexporter/consistent_hashing.go`): each backend at 100 positions
    crc32(name + byte(i)) mod 36000, a trace at crc32(trace id) mod 36000, served by the next
    backend position clockwise."""

    def __init__(self, backends: list[str]) -> None:
        owners: dict[int, str] = {}
        for backend in backends:
            for i in range(POINTS_PER_BACKEND):
                position = zlib.crc32(backend.encode() + bytes([i])) % RING_POSITIONS
                owners.setdefault(position, backend)  # an occupied position is skipped
        self._positions = sorted(owners)
        self._owners = [owners[p] for p in self._positions]

    def backend_for(self, trace_id: bytes) -> str:
        position = zlib.crc32(trace_id) % RING_POSITIONS
        index = bisect.bisect_left(self._positions, position)
        return self._owners[index % len(self._owners)]


class TraceIdRouter(trace_service_pb2_grpc.TraceServiceServicer):
    """A stand-in for the gateway: receives OTLP/gRPC traces and re-exports each span to the
    replica the ring picks for its trace id, keeping resource and scope."""

    def __init__(self, replicas: Mapping[str, str]) -> None:
        self.ring = TraceIdRing(list(replicas))
        self._channels = {name: grpc.insecure_channel(target) for name, target in replicas.items()}
        self._stubs = {
            name: trace_service_pb2_grpc.TraceServiceStub(channel)
            for name, channel in self._channels.items()
        }

    def Export(self, request: Any, context: Any) -> Any:
        batches: dict[str, Any] = {}
        scopes: dict[tuple[str, int, int], Any] = {}
        for r, resource_spans in enumerate(request.resource_spans):
            for s, scope_spans in enumerate(resource_spans.scope_spans):
                for span in scope_spans.spans:
                    backend = self.ring.backend_for(span.trace_id)
                    key = (backend, r, s)
                    if key not in scopes:
                        batch = batches.setdefault(
                            backend, trace_service_pb2.ExportTraceServiceRequest()
                        )
                        out = batch.resource_spans.add()
                        out.resource.CopyFrom(resource_spans.resource)
                        out.schema_url = resource_spans.schema_url
                        scopes[key] = out.scope_spans.add()
                        scopes[key].scope.CopyFrom(scope_spans.scope)
                        scopes[key].schema_url = scope_spans.schema_url
                    scopes[key].spans.add().CopyFrom(span)
        for backend, batch in batches.items():
            try:
                self._stubs[backend].Export(batch, timeout=10)
            except grpc.RpcError as exc:
                context.abort(exc.code(), f"{backend}: {exc.details()}")
        return trace_service_pb2.ExportTraceServiceResponse()

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()


def to_request(document: Mapping[str, Any]) -> Any:
    """An OTLP/JSON traces document (hex ids) as protobuf."""

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode()
                if k in ("traceId", "spanId", "parentSpanId")
                else convert(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    return json_format.ParseDict(convert(document), trace_service_pb2.ExportTraceServiceRequest())


def split_requests(traces: list[Any], spans_per_request: int, seed: int) -> list[Any]:
    """The spans of `traces` (one-trace requests) shuffled together and cut into requests of
    `spans_per_request` spans: every trace over several requests, requests mixing traces."""
    spans = [
        (t, resource_spans, scope_spans, span)
        for t, request in enumerate(traces)
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    random.Random(seed).shuffle(spans)
    requests = []
    for start in range(0, len(spans), spans_per_request):
        request = trace_service_pb2.ExportTraceServiceRequest()
        groups: dict[tuple[int, int, int], Any] = {}
        for t, resource_spans, scope_spans, span in spans[start : start + spans_per_request]:
            key = (t, id(resource_spans), id(scope_spans))
            if key not in groups:
                out = request.resource_spans.add()
                out.resource.CopyFrom(resource_spans.resource)
                groups[key] = out.scope_spans.add()
                groups[key].scope.CopyFrom(scope_spans.scope)
            groups[key].spans.add().CopyFrom(span)
        requests.append(request)
    return requests


def request_trace_ids(request: Any) -> set[bytes]:
    return {
        bytes(span.trace_id)
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    }


@pytest.fixture
def router_server() -> Iterator[Any]:
    servers: list[tuple[grpc.Server, TraceIdRouter]] = []

    def start(replicas: Mapping[str, str]) -> tuple[str, TraceIdRouter]:
        router = TraceIdRouter(replicas)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(router, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append((server, router))
        return f"127.0.0.1:{port}", router

    yield start
    for server, router in servers:
        server.stop(grace=1).wait(10)
        router.close()


def wait_for_runs(store: RedisStore, runs: int, timeout: float = 30.0) -> None:
    """Until the agent's shared baseline holds `runs` runs (its traces were finalized)."""
    deadline = time.monotonic() + timeout
    while True:
        baseline = store.get(AGENT_KEY)
        learned = 0 if baseline is None else baseline.runs
        if learned == runs:
            return
        assert time.monotonic() < deadline, f"baseline runs {learned}, expected {runs}"
        time.sleep(0.05)


AGENT_KEY = "research-service/planner"  # service.name/gen_ai.agent.name of the drift scenarios
REPLICA_NAMES = ["tracehound-0:4317", "tracehound-1:4317"]  # ring keys, as a static resolver
PHASE_ONE = 6  # traces learned before the second phase is scored


def test_a_trace_id_router_keeps_each_trace_whole_on_one_replica_sharing_redis(
    redis_url: str, router_server: Any
) -> None:
    traces = [to_request(d) for d in scenario_documents(SCENARIOS["control"]())]
    trace_ids = [bytes(t.resource_spans[0].scope_spans[0].spans[0].trace_id) for t in traces]
    spans_per_trace = {
        tid: sum(len(ss.spans) for rs in t.resource_spans for ss in rs.scope_spans)
        for tid, t in zip(trace_ids, traces, strict=True)
    }
    ring = TraceIdRing(REPLICA_NAMES)
    owner = {tid: ring.backend_for(tid) for tid in trace_ids}
    phases = [list(range(PHASE_ONE)), list(range(PHASE_ONE, len(traces)))]
    for phase in phases:  # both replicas get traces in both phases (the ring is deterministic)
        assert {owner[trace_ids[t]] for t in phase} == set(REPLICA_NAMES)

    sinks = {name: OTLPSink().start() for name in REPLICA_NAMES}
    replicas: dict[str, Serve] = {}
    store = RedisStore(redis_url)
    try:
        for name in REPLICA_NAMES:
            replicas[name] = Serve.start(
                ["--quiet-period", "1", "--forward", f"http://{sinks[name].endpoint}"],
                env={TRACEHOUND_REDIS_URL: redis_url},
            )
        gateway, _router = router_server({n: r.grpc for n, r in replicas.items()})
        sent_requests: list[Any] = []
        with grpc.insecure_channel(gateway) as channel:
            client = trace_service_pb2_grpc.TraceServiceStub(channel)
            learned = 0
            for number, phase in enumerate(phases):
                requests = split_requests([traces[t] for t in phase], 4, seed=number)
                for request in requests:
                    client.Export(request, timeout=10)
                sent_requests += requests
                learned += len(phase)

                wait_for_runs(store, learned)
    finally:
        codes = {name: replica.stop() for name, replica in replicas.items()}
        for sink in sinks.values():
            sink.stop()
        store.close()
    assert set(codes.values()) == {0}, {n: r.text[-20:] for n, r in replicas.items()}

    # the requests really split traces: each trace over >= 2 requests, requests mixing traces
    for tid in trace_ids:
        assert sum(tid in request_trace_ids(r) for r in sent_requests) >= 2
    assert any(len(request_trace_ids(r)) >= 2 for r in sent_requests)

    received: dict[str, dict[bytes, list[Any]]] = {}
    for name, sink in sinks.items():
        by_trace: dict[bytes, list[Any]] = defaultdict(list)
        for item in sink.spans():
            by_trace[bytes(item.span.trace_id)].append(item)
        received[name] = by_trace
    drift_runs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for index, tid in enumerate(trace_ids):
        holders = [name for name in REPLICA_NAMES if received[name].get(tid)]
        assert holders == [owner[tid]], f"trace {tid.hex()} forwarded by {holders}"
        spans = received[owner[tid]][tid]
        assert len(spans) == spans_per_trace[tid]  # every span, once
        (root,) = [s for s in spans if not s.span.parent_span_id]
        attrs = root.attributes
        # trace-level results on the root, computed from the whole trace
        assert attrs[names.ATTR_DRIFT_AGENT] == AGENT_KEY
        tools = sum(1 for s in spans if s.name.startswith("execute_tool"))
        assert attrs[names.ATTR_EVIDENCE_SOURCES] == tools == 3
        assert attrs[names.ATTR_LOOPS_DETECTED] is False
        for span in spans:
            if span is not root:
                assert names.ATTR_DRIFT_AGENT not in span.attributes
                assert names.ATTR_EVIDENCE_SOURCES not in span.attributes
        phase = 0 if index < PHASE_ONE else 1
        drift_runs[owner[tid]].append((phase, int(attrs[names.ATTR_DRIFT_BASELINE_RUNS])))

    # one baseline, one Redis key, learned by both replicas: in phase two each replica scores
    # against every run of phase one, including those only the other replica saw
    with RedisStore(redis_url) as check:
        assert [(info.key, info.runs) for info in check.list()] == [(AGENT_KEY, len(traces))]
    for name in REPLICA_NAMES:
        own_first = sum(1 for phase, _ in drift_runs[name] if phase == 0)
        assert own_first < PHASE_ONE
        second = [runs for phase, runs in drift_runs[name] if phase == 1]
        assert second and all(runs >= PHASE_ONE for runs in second), (name, drift_runs[name])
