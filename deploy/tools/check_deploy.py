#!/usr/bin/env python3
"""Checks deploy/: every YAML and JSON file parses, and the files agree with each other and
with the programs' sources.

  python3 deploy/tools/check_deploy.py [--root REPO] [--deploy DIR]

Checked references:
- images: every `image:` of compose and Kubernetes is `callpush/<target>` of a stage the
  Dockerfile builds (or an allowed third-party image); compose `build.target` matches its image;
- env keys: every CALLPUSH_* variable set in compose or Kubernetes is read by the sources
  (a "CALLPUSH_…" literal in Services/ or Shared/; CALLPUSH_KAFKA_<PROPERTY> and <KEY>_FILE are
  the readers' dynamic forms). Keys of a program whose sources are not in the tree are reported,
  not failed (dispatch before it is merged);
- ports: probes and Service targetPorts name a containerPort; a worker's containerPort equals
  its CALLPUSH_HTTP_PORT; the Dockerfile EXPOSEs the container ports; compose port mappings
  reach the ports the programs listen on;
- files: paths in *_FILE / CALLPUSH_APPS_FILE / CALLPUSH_APNS_CA_FILE / file: values lie under a
  mounted volume; volumes name ConfigMaps / Secrets defined here;
- shutdown: a worker's terminationGracePeriodSeconds (compose: stop_grace_period) exceeds what a
  SIGTERM may take: the drain bound, one APNs attempt, the 10 s outcome write, 2 s, and 3 s to
  commit and leave the group (the worker's revoke bound); no static membership in a Deployment;
- topics: Strimzi requests and status have equal partitions; the DLQ keeps records longer;
  KEDA scales the worker Deployment on its consumer group and requests topic, at most one
  replica per partition; PDB selectors select a Deployment; kustomization resources exist;
- metrics: every callpush_* name in the alert rules and the dashboard is exported by the sources;
- exposure: secret volumes use defaultMode 0400 (0440); an Ingress with TLS publishes dispatch's
  ack route and nothing else of it; dispatch's /metrics has its own port.
Exit status 0 when everything holds, 1 with one line per problem otherwise.
"""
import argparse
import json
import os
import re
import sys

import yaml

THIRD_PARTY_IMAGES = {"apache/kafka"}
OUTCOME_WRITE_BOUND_MS = 10_000
# PushWorkerConfiguration: revokeTimeout = drainTimeout + leftoverBound (attempt + outcome write + 2 s) + 3 s.
LEFTOVER_EXTRA_MS = 2_000
COMMIT_AND_LEAVE_MS = 3_000
DEFAULT_WORKER_HTTP_PORT = 9090
PROGRAM_SOURCES = {  # image target -> source directories that must exist to check its env keys
    "dispatch": ["Services/DispatchService", "Services/dispatch"],
    "push-worker": ["Services/PushWorker", "Services/push-worker"],
    "apns-simulator": ["Services/apns-simulator"],
    "callpush": ["Services/CallpushCLI"],
}

problems = []
notes = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def load_documents(deploy):
    """Every YAML / JSON document under deploy/, as (path, document)."""
    documents = []
    for directory, _, files in os.walk(deploy):
        for name in sorted(files):
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, deploy)
            try:
                if name.endswith((".yaml", ".yml")):
                    with open(path) as handle:
                        for document in yaml.safe_load_all(handle):
                            if document is not None:
                                documents.append((relative, document))
                elif name.endswith(".json"):
                    with open(path) as handle:
                        documents.append((relative, json.load(handle)))
            except (yaml.YAMLError, json.JSONDecodeError) as error:
                problem(relative, f"does not parse: {error}".splitlines()[0])
    return documents


def swift_sources(root):
    for top in ("Services", "Shared"):
        for directory, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith(".swift"):
                    with open(os.path.join(directory, name), encoding="utf-8") as handle:
                        yield handle.read()


def source_facts(root):
    env_keys, env_prefixes, metrics = set(), set(), set()
    for text in swift_sources(root):
        for literal in re.findall(r'"(CALLPUSH_[A-Z0-9_]*)"', text):
            (env_prefixes if literal.endswith("_") else env_keys).add(literal)
        if '"POD_NAME"' in text:
            env_keys.add("POD_NAME")
        metrics.update(re.findall(r'"(callpush_[a-z0-9_]+)"', text))
        for namespace, subsystem in re.findall(r'MetricNameDescriptor\(namespace: "([a-z_]+)", subsystem: "([a-z_]+)"', text):
            for metric, unit in re.findall(r'\bname\("([a-z_]+)", "([a-z_]*)"', text):
                metrics.add("_".join(part for part in (namespace, subsystem, metric, unit) if part))
    return env_keys, env_prefixes, metrics


def dockerfile_facts(deploy):
    path = os.path.join(deploy, "docker", "Dockerfile")
    targets, exposed, current = set(), {}, None
    with open(path) as handle:
        for line in handle:
            match = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line.strip(), re.IGNORECASE)
            if match:
                current = match.group(1)
                if current not in ("builder", "runtime"):
                    targets.add(current)
                continue
            match = re.match(r"EXPOSE\s+(.+)", line.strip())
            if match and current:
                exposed.setdefault(current, set()).update(int(port.split("/")[0]) for port in match.group(1).split())
    return targets, exposed


def image_target(image, targets, where):
    name = image.split("@")[0].rsplit(":", 1)[0] if ":" in image.split("/")[-1] else image
    repository = "/".join(name.split("/")[-2:])
    if repository in THIRD_PARTY_IMAGES:
        return None
    owner, _, target = repository.partition("/")
    if owner != "callpush" or target not in targets:
        problem(where, f"image {image} is not built by deploy/docker/Dockerfile (targets: {', '.join(sorted(targets))})")
        return None
    return target


def check_env(where, target, names, facts, root):
    env_keys, env_prefixes, _ = facts
    present = all(os.path.isdir(os.path.join(root, d)) for d in PROGRAM_SOURCES.get(target, []))
    for name in names:
        if not (name.startswith("CALLPUSH_") or name == "POD_NAME"):
            continue
        known = (name in env_keys or any(name.startswith(p) and len(name) > len(p) for p in env_prefixes)
                 or (name.endswith("_FILE") and name[:-5] in env_keys))
        if known:
            continue
        if not present:
            notes.append(f"{where}: {name} not checked ({target}'s sources are not in this tree)")
        else:
            problem(where, f"environment variable {name} is not read by any program (no \"{name}\" in Services/ or Shared/)")


def check_compose(path, compose, targets, exposed, facts, root):
    for name, service in (compose.get("services") or {}).items():
        where = f"{path} service {name}"
        image = service.get("image")
        target = image_target(image, targets, where) if image else None
        build = service.get("build")
        if isinstance(build, dict):
            if build.get("target") not in targets:
                problem(where, f"build target {build.get('target')} is not a Dockerfile stage")
            elif target and build.get("target") != target:
                problem(where, f"builds target {build.get('target')} but is tagged {image}")
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        check_env(where, target, environment.keys(), facts, root)
        listening = set()
        if target == "push-worker":
            listening.add(int(environment.get("CALLPUSH_HTTP_PORT", DEFAULT_WORKER_HTTP_PORT)))
        if target == "dispatch" and "CALLPUSH_DISPATCH_PORT" in environment:
            listening.add(int(environment["CALLPUSH_DISPATCH_PORT"]))
        if target == "dispatch" and int(environment.get("CALLPUSH_DISPATCH_METRICS_PORT", -1)) > 0:
            listening.add(int(environment["CALLPUSH_DISPATCH_METRICS_PORT"]))
        if target == "push-worker":
            # compose's default stop_grace_period is 10 s, then SIGKILL.
            grace = compose_duration_ms(service.get("stop_grace_period", "10s"))
            shutdown, how = worker_shutdown(environment)
            if grace <= shutdown:
                problem(where, f"stop_grace_period ({grace} ms) must exceed {how}")
            if "CALLPUSH_GROUP_INSTANCE_ID" in environment:
                problem(where, "CALLPUSH_GROUP_INSTANCE_ID (static membership): librdkafka 2.0.2's static members never "
                               "send LeaveGroup; the workers are dynamic members (docs/operations.md)")
        command = service.get("command") or []
        if target == "apns-simulator" and isinstance(command, list):
            for flag in ("--port", "--admin-port"):
                if flag in command:
                    listening.add(int(command[command.index(flag) + 1]))
        for mapping in service.get("ports") or []:
            container = int(str(mapping).split(":")[-1].split("/")[0])
            if listening and container not in listening:
                problem(where, f"port mapping {mapping} reaches {container}, but the program listens on {sorted(listening)}")
            if target and container not in exposed.get(target, set()):
                problem(where, f"port {container} is not EXPOSEd by the {target} image")
        for dependency, condition in (service.get("depends_on") or {}).items():
            if dependency not in compose["services"]:
                problem(where, f"depends on unknown service {dependency}")


def worker_shutdown(env):
    """The longest a push-worker with environment `env` takes from SIGTERM to its exit (ms), and how."""
    drain = int(env.get("CALLPUSH_DRAIN_TIMEOUT_MS") or 5000)
    attempt = int(env.get("CALLPUSH_APNS_TIMEOUT_MS") or 5000)
    total = drain + attempt + OUTCOME_WRITE_BOUND_MS + LEFTOVER_EXTRA_MS + COMMIT_AND_LEAVE_MS
    return total, (f"the drain bound ({drain} ms) plus one APNs attempt ({attempt} ms), the outcome write bound "
                   f"({OUTCOME_WRITE_BOUND_MS} ms), {LEFTOVER_EXTRA_MS // 1000} s and {COMMIT_AND_LEAVE_MS // 1000} s to commit and leave")


def compose_duration_ms(text):
    total = 0
    for value, unit in re.findall(r"(\d+)(ms|s|m|h)", str(text)):
        total += int(value) * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit]
    return total


def container_env(container):
    values = {}
    for item in container.get("env") or []:
        values[item["name"]] = item.get("value")
    return values


def check_kubernetes(documents, targets, exposed, facts, root):
    by_kind = {}
    for path, document in documents:
        if isinstance(document, dict) and "kind" in document and "apiVersion" in document:
            by_kind.setdefault(document["kind"], []).append((path, document))
    config_maps = {d["metadata"]["name"] for _, d in by_kind.get("ConfigMap", [])}
    secrets = {d["metadata"]["name"] for _, d in by_kind.get("Secret", [])}
    deployments = {}
    for path, deployment in by_kind.get("Deployment", []):
        name = deployment["metadata"]["name"]
        where = f"{path} Deployment {name}"
        deployments[name] = deployment
        spec = deployment["spec"]["template"]["spec"]
        labels = deployment["spec"]["template"]["metadata"].get("labels", {})
        if any(labels.get(k) != v for k, v in deployment["spec"]["selector"]["matchLabels"].items()):
            problem(where, "selector does not match the pod template's labels")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for volume in volumes.values():
            if "secret" in volume and volume["secret"].get("defaultMode", 0o644) & 0o337 != 0:
                problem(where, f"secret volume {volume['name']} needs defaultMode 0400 (0440 with an fsGroup)")
            if "configMap" in volume and volume["configMap"]["name"] not in config_maps:
                problem(where, f"volume {volume['name']} names ConfigMap {volume['configMap']['name']}, not defined in deploy/kubernetes")
            if "secret" in volume and volume["secret"]["secretName"] not in secrets:
                problem(where, f"volume {volume['name']} names Secret {volume['secret']['secretName']}, not defined in deploy/kubernetes")
        for container in spec["containers"]:
            cwhere = f"{where} container {container['name']}"
            target = image_target(container["image"], targets, cwhere)
            # The program: from its image, else (image wrong) from the container's name.
            program = target or container["name"]
            env = container_env(container)
            check_env(cwhere, program, env.keys(), facts, root)
            ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
            for port in ports.values():
                if target and port not in exposed.get(target, set()):
                    problem(cwhere, f"containerPort {port} is not EXPOSEd by the {target} image")
            if program == "push-worker":
                http = int(env.get("CALLPUSH_HTTP_PORT") or DEFAULT_WORKER_HTTP_PORT)
                if http not in ports.values():
                    problem(cwhere, f"CALLPUSH_HTTP_PORT {http} is not a containerPort")
                grace = spec.get("terminationGracePeriodSeconds", 30) * 1000
                shutdown, how = worker_shutdown(env)
                if grace <= shutdown:
                    problem(cwhere, f"terminationGracePeriodSeconds ({grace} ms) must exceed {how}")
                # librdkafka 2.0.2's static members never send LeaveGroup: a Deployment's pod names do
                # not survive a replacement, so static membership belongs to StatefulSets only.
                if "CALLPUSH_GROUP_INSTANCE_ID" in [item["name"] for item in container.get("env", [])]:
                    problem(cwhere, "CALLPUSH_GROUP_INSTANCE_ID (static membership) needs identities that survive a "
                                    "replacement: use a StatefulSet, or leave it out of a Deployment")
            for probe in ("readinessProbe", "livenessProbe"):
                port = container.get(probe, {}).get("httpGet", {}).get("port")
                if port is not None and port not in ports and port not in ports.values():
                    problem(cwhere, f"{probe} port {port} is not a containerPort")
            mounts = [m["mountPath"].rstrip("/") + "/" for m in container.get("volumeMounts", [])]
            for mount in container.get("volumeMounts", []):
                if mount["name"] not in volumes:
                    problem(cwhere, f"volumeMount {mount['name']} has no volume")
            for key, value in env.items():
                if not isinstance(value, str):
                    continue
                path_value = value[len("file:"):] if value.startswith("file:") else value
                if (key.endswith("_FILE") or value.startswith("file:") or key.endswith("_LOCATION")) and path_value.startswith("/"):
                    if not any(path_value.startswith(m) for m in mounts):
                        problem(cwhere, f"{key}={value}: no volume is mounted there")
    for path, service in by_kind.get("Service", []):
        where = f"{path} Service {service['metadata']['name']}"
        selected = [d for d in deployments.values()
                    if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in service["spec"]["selector"].items())]
        if not selected:
            problem(where, "selects no Deployment")
        for port in service["spec"]["ports"]:
            target_port = port.get("targetPort", port["port"])
            for deployment in selected:
                container_ports = [(p.get("name"), p["containerPort"])
                                   for c in deployment["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])]
                if not any(target_port in pair for pair in container_ports):
                    problem(where, f"targetPort {target_port} is not a containerPort of {deployment['metadata']['name']}")
    check_dispatch_exposure(by_kind, deployments)
    for path, budget in by_kind.get("PodDisruptionBudget", []):
        match = budget["spec"]["selector"]["matchLabels"]
        if not any(all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in match.items()) for d in deployments.values()):
            problem(f"{path} PodDisruptionBudget {budget['metadata']['name']}", "selects no Deployment")

    topics = {d["spec"].get("topicName", d["metadata"]["name"]): d["spec"] for _, d in by_kind.get("KafkaTopic", [])}
    worker = deployments.get("push-worker")
    worker_env = container_env(worker["spec"]["template"]["spec"]["containers"][0]) if worker else {}
    requests = worker_env.get("CALLPUSH_TOPIC_REQUESTS") or "voip.call-requests"
    status = worker_env.get("CALLPUSH_TOPIC_STATUS") or "voip.call-status"
    dlq = worker_env.get("CALLPUSH_TOPIC_DLQ") or "voip.call-requests.dlq"
    if topics:
        for name in (requests, status, dlq):
            if name not in topics:
                problem("kubernetes KafkaTopic", f"no KafkaTopic for {name}")
        if requests in topics and status in topics and topics[requests]["partitions"] != topics[status]["partitions"]:
            problem("kubernetes KafkaTopic", f"{requests} and {status} must have the same partition count")
        if requests in topics and dlq in topics:
            if int(topics[dlq]["config"]["retention.ms"]) <= int(topics[requests]["config"]["retention.ms"]):
                problem("kubernetes KafkaTopic", f"{dlq} should keep records longer than {requests}")
    group = worker_env.get("CALLPUSH_GROUP_ID") or "callpush-push-worker"
    for path, scaled in by_kind.get("ScaledObject", []):
        where = f"{path} ScaledObject {scaled['metadata']['name']}"
        target = scaled["spec"]["scaleTargetRef"]["name"]
        if target not in deployments:
            problem(where, f"scales {target}, which is no Deployment here")
        for trigger in scaled["spec"]["triggers"]:
            if trigger["type"] != "kafka":
                continue
            metadata = trigger["metadata"]
            if metadata.get("consumerGroup") != group:
                problem(where, f"consumerGroup {metadata.get('consumerGroup')} is not the workers' group {group}")
            if metadata.get("topic") != requests:
                problem(where, f"topic {metadata.get('topic')} is not the requests topic {requests}")
            if requests in topics and scaled["spec"].get("maxReplicaCount", 100) > topics[requests]["partitions"]:
                problem(where, f"maxReplicaCount exceeds the {topics[requests]['partitions']} partitions of {requests}")
    return by_kind


ACK_PATH = re.compile(r"^/v1/calls/(\[0-9a-fA-F-\]\{36\}|\.\+|\[\^/\]\+)/ack\$?$")


def check_dispatch_exposure(by_kind, deployments):
    """Phones reach dispatch's ack route through TLS, and nothing else of it is published; its
    metrics are not on the API port."""
    if "dispatch" not in deployments:
        return
    dispatch_services = {s["metadata"]["name"] for _, s in by_kind.get("Service", [])
                         if s["spec"]["selector"].get("app.kubernetes.io/name") == "dispatch"}
    ingresses = [(path, i) for path, i in by_kind.get("Ingress", [])
                 if any(p["backend"]["service"]["name"] in dispatch_services
                        for rule in i["spec"].get("rules", []) for p in rule.get("http", {}).get("paths", []))]
    if not ingresses:
        problem("kubernetes dispatch", "no Ingress publishes the ack route to phones")
    for path, ingress in ingresses:
        where = f"{path} Ingress {ingress['metadata']['name']}"
        hosts = {rule.get("host") for rule in ingress["spec"].get("rules", [])}
        tls_hosts = {host for entry in ingress["spec"].get("tls", []) for host in entry.get("hosts", [])}
        if not hosts or not hosts <= tls_hosts:
            problem(where, "every host must be served with TLS (spec.tls)")
        for rule in ingress["spec"].get("rules", []):
            for route in rule.get("http", {}).get("paths", []):
                if not ACK_PATH.match(route["path"]):
                    problem(where, f"publishes {route['path']}: only /v1/calls/<id>/ack may face the internet")
    container = deployments["dispatch"]["spec"]["template"]["spec"]["containers"][0]
    env = container_env(container)
    if env.get("CALLPUSH_DISPATCH_METRICS_PORT") in (None, "-1") or env.get("CALLPUSH_DISPATCH_METRICS_PORT") == env.get("CALLPUSH_DISPATCH_PORT"):
        problem("kubernetes dispatch", "CALLPUSH_DISPATCH_METRICS_PORT must give /metrics its own port")


def check_kustomization(deploy):
    path = os.path.join(deploy, "kubernetes", "kustomization.yaml")
    if not os.path.exists(path):
        return
    with open(path) as handle:
        for resource in yaml.safe_load(handle).get("resources", []):
            if not os.path.exists(os.path.join(deploy, "kubernetes", resource)):
                problem("kubernetes/kustomization.yaml", f"resource {resource} does not exist")


def check_metrics(documents, metrics):
    def expressions(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    yield value
                else:
                    yield from expressions(value)
        elif isinstance(node, list):
            for item in node:
                yield from expressions(item)
    used = 0
    for path, document in documents:
        for expression in expressions(document):
            for name in set(re.findall(r"\bcallpush_[a-z0-9_]+", expression)):
                used += 1
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                if name not in metrics and base not in metrics:
                    problem(path, f"metric {name} is not exported by any program (known: {', '.join(sorted(metrics))})")
    for path, document in documents:
        if isinstance(document, dict) and "groups" in document:
            for group in document["groups"]:
                for rule in group.get("rules", []):
                    if "alert" in rule and not (rule.get("labels", {}).get("severity") and rule.get("annotations", {}).get("summary")):
                        problem(path, f"alert {rule['alert']} needs labels.severity and annotations.summary")
    return used


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    parser.add_argument("--deploy", default=os.path.dirname(here))
    arguments = parser.parse_args()
    documents = load_documents(arguments.deploy)
    facts = source_facts(arguments.root)
    targets, exposed = dockerfile_facts(arguments.deploy)
    for path, document in documents:
        if path.startswith("compose") and isinstance(document, dict) and "services" in document:
            check_compose(path, document, targets, exposed, facts, arguments.root)
    kinds = check_kubernetes(documents, targets, exposed, facts, arguments.root)
    check_kustomization(arguments.deploy)
    used = check_metrics(documents, facts[2])
    for note in notes:
        print(f"note: {note}")
    for line in problems:
        print(f"problem: {line}")
    summary = (f"{len(documents)} documents, {len(targets)} image targets, {sum(len(v) for v in kinds.values())} "
               f"Kubernetes objects, {used} metric references, {len(facts[0])} env keys known: ")
    print(summary + ("OK" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
