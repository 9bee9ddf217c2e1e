#!/usr/bin/env python3
"""Validates deploy/kubernetes against the Kubernetes API schemas, offline.

  python3 deploy/tools/validate_kubernetes.py [--deploy DIR] [--versions 1.25,1.37]

- Built-in kinds (Deployment, Service, Secret, ...): the OpenAPI schemas that the PyPI package
  kubernetes-validate ships, strict (unknown fields refused), for the oldest and the newest
  Kubernetes version it knows (or --versions).
- KEDA (ScaledObject, TriggerAuthentication): the models that cloudcoil-models-keda (PyPI)
  generates from KEDA's CRDs, turned into a JSON schema that refuses unknown fields, as the
  API server does for a structural CRD.
- Strimzi KafkaTopic: no package on PyPI ships Strimzi's CRDs, so the CRD itself is not used; the
  schema below carries the spec of its kafka.strimzi.io/v1beta2 version as Strimzi's CRD
  (packaging/install/cluster-operator/043-Crd-kafkatopic.yaml) defines it: partitions (>= 1),
  replicas (1-32767), config (an object), topicName (a string; here also Kafka's name rule),
  nothing else; plus the strimzi.io/cluster label the Topic Operator selects on. The deploy run (Tests/CallpushCLITests/DeployRunTests.swift)
  compares the topics with what `callpush topics create` would make.
- Kustomization is not an API object (kustomize reads it); check_deploy.py checks its resources.
Any other kind fails: a new kind needs a schema here first.
Exit status 0 when every object validates, 1 with one line per problem, 2 when a package is missing.
"""
import argparse
import copy
import os
import sys

import yaml

try:
    import kubernetes_validate
    from kubernetes_validate.utils import all_versions, major_minor
except ImportError:
    print("validate_kubernetes: kubernetes-validate is not installed (scripts/install-deps)", file=sys.stderr)
    sys.exit(2)
try:
    import jsonschema
    from cloudcoil.models.keda import v1alpha1 as keda
except ImportError:
    print("validate_kubernetes: cloudcoil-models-keda is not installed (scripts/install-deps)", file=sys.stderr)
    sys.exit(2)

NOT_API_OBJECTS = {("kustomize.config.k8s.io/v1beta1", "Kustomization")}
KEDA_MODELS = {("keda.sh/v1alpha1", "ScaledObject"): keda.ScaledObject,
               ("keda.sh/v1alpha1", "TriggerAuthentication"): keda.TriggerAuthentication}
# kafka.strimzi.io/v1beta2 KafkaTopic, as Strimzi documents it (only the fields of its spec).
KAFKA_TOPIC = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "kafka.strimzi.io/v1beta2"},
        "kind": {"const": "KafkaTopic"},
        "metadata": {
            "type": "object",
            "required": ["name", "labels"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "required": ["strimzi.io/cluster"],
                           "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "partitions": {"type": "integer", "minimum": 1},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 32767},
                "config": {"type": "object", "additionalProperties": {"type": ["string", "integer", "number", "boolean"]}},
                "topicName": {"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,249}$"},
            },
        },
    },
}


def strict(schema):
    """`schema` with `additionalProperties: false` on every object that lists its properties
    (maps, which have only `additionalProperties`, stay open)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    return schema


def documents(deploy):
    directory = os.path.join(deploy, "kubernetes")
    for name in sorted(os.listdir(directory)):
        if name.endswith((".yaml", ".yml")):
            with open(os.path.join(directory, name)) as handle:
                for document in yaml.safe_load_all(handle):
                    if document:
                        yield f"kubernetes/{name}", document


def error_text(error):
    path = ".".join(str(part) for part in error.absolute_path)
    return f"{path or '(top)'}: {error.message}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    known = [major_minor(v) for v in all_versions()]
    parser.add_argument("--deploy", default=os.path.dirname(here))
    parser.add_argument("--versions", default=f"{known[0]},{known[-1]}",
                        help="comma-separated Kubernetes versions (default: the oldest and newest kubernetes-validate knows)")
    arguments = parser.parse_args()
    versions = arguments.versions.split(",")
    keda_schemas = {key: strict(model.model_json_schema(by_alias=True)) for key, model in KEDA_MODELS.items()}
    problems, counts = [], {"kubernetes": 0, "keda": 0, "strimzi": 0}
    for path, document in documents(arguments.deploy):
        key = (document.get("apiVersion"), document.get("kind"))
        where = f"{path} {key[1]} {document.get('metadata', {}).get('name')}"
        if key in NOT_API_OBJECTS:
            continue
        if key in keda_schemas:
            counts["keda"] += 1
            for error in jsonschema.Draft202012Validator(keda_schemas[key]).iter_errors(document):
                problems.append(f"{where}: KEDA CRD schema: {error_text(error)}")
            continue
        if key == ("kafka.strimzi.io/v1beta2", "KafkaTopic"):
            counts["strimzi"] += 1
            for error in jsonschema.Draft202012Validator(KAFKA_TOPIC).iter_errors(document):
                problems.append(f"{where}: KafkaTopic fields: {error_text(error)}")
            continue
        counts["kubernetes"] += 1
        for version in versions:
            try:
                kubernetes_validate.validate(document, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                problems.append(f"{where}: Kubernetes {error.version}: "
                                f"{'.'.join(str(p) for p in error.path) or '(top)'}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError:
                problems.append(f"{where}: no schema for {key[0]} {key[1]} in Kubernetes {version}")
    for line in problems:
        print(f"problem: {line}")
    print(f"{counts['kubernetes']} Kubernetes objects (strict, versions {', '.join(versions)}), {counts['keda']} KEDA objects "
          f"(cloudcoil-models-keda), {counts['strimzi']} KafkaTopics (documented fields): "
          + ("OK" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
