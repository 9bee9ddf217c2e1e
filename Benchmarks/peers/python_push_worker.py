#!/usr/bin/env python3
"""A push-worker a team would write in a day, the reference for `callpush-bench drain`.

confluent-kafka (librdkafka, like callpush) consumes `voip.call-requests`; each ring is decoded
(an undecodable event gets a `rejected` status), its deadline checked, deduplicated by (callId,
device token, replay), pushed with the UNMODIFIED
aioapns client (pointed at the APNs simulator by Tests/APNsSimulatorTests/aioapns/simulator_client.py), and
a status is produced to the same partition number of the status topic. Offsets are committed
after the batch's statuses were acknowledged (at-least-once, as callpush does).

Runs until it has handled --expect rings, then prints one JSON line:
{"rings": N, "sent": S, "seconds": T, "per_second": R}. Exit status 2 when a library is missing.
"""
import argparse
import asyncio
import json
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

# The aioapns set-up of the simulator interop test (Tests/APNsSimulatorTests/aioapns/simulator_client.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Tests" / "APNsSimulatorTests" / "aioapns"))

try:
    from confluent_kafka import Consumer, Producer
    from aioapns import NotificationRequest, PushType
    from simulator_client import simulator_client
except ImportError as error:
    print(f"missing library: {error} (pip install confluent-kafka aioapns)", file=sys.stderr)
    sys.exit(2)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--requests", required=True)
    parser.add_argument("--status", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=500)
    parser.add_argument("--connections", type=int, default=2)
    return parser.parse_args()


def parse_time(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def now_text():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def main(args):
    apns = simulator_client(args.host, args.port, args.ca, args.key, args.key_id, args.team_id, args.bundle + ".voip",
                            args.connections)

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([args.requests])
    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": True, "linger.ms": 1})
    worker = socket.gethostname()
    handled = set()
    semaphore = asyncio.Semaphore(args.concurrency)
    rings = sent = 0
    started = None

    async def deliver(message):
        nonlocal sent
        try:
            event = json.loads(message.value())
            if event.get("type") != "ring":
                return None
            device = event["device"]
            status = {"callId": event["callId"], "deviceId": device.get("id"), "app": event["app"],
                      "attempt": 0, "replay": event.get("replay", 0), "worker": worker}
            key = (event["callId"], device["token"], event.get("replay", 0))
            deadline = parse_time(event["ringDeadline"])
            handle = event["caller"]["handle"]
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            status = {"callId": (message.key() or b"").decode(errors="replace"), "state": "rejected", "attempt": 0,
                      "error": {"code": "invalid", "message": str(error)[:200]}, "worker": worker, "at": now_text()}
            producer.produce(args.status, key=message.key(), value=json.dumps(status).encode(), partition=message.partition())
            return status
        if key in handled:
            status["state"] = "duplicate"
        elif deadline <= datetime.now(timezone.utc):
            status["state"] = "expired"
        else:
            handled.add(key)
            request = NotificationRequest(
                device_token=device["token"],
                message={"callId": event["callId"], "handle": handle,
                         "displayName": event["caller"].get("displayName"), "hasVideo": event.get("hasVideo", False),
                         "ringDeadline": event["ringDeadline"], "attributes": event.get("attributes", {})},
                push_type=PushType.VOIP, priority=10,
                time_to_live=max(1, int((deadline - datetime.now(timezone.utc)).total_seconds())))
            async with semaphore:
                result = await apns.send_notification(request)
            status["attempt"] = 1
            status["state"] = "sent" if result.is_successful else "failed"
            status["apns"] = {"id": result.notification_id, "status": int(result.status), "reason": result.description}
            if result.is_successful:
                sent += 1
        status["at"] = now_text()
        producer.produce(args.status, key=event["callId"].encode(), value=json.dumps(status).encode(),
                         partition=message.partition())
        return status

    while rings < args.expect:
        messages = consumer.consume(num_messages=500, timeout=0.1)
        if not messages:
            continue
        if started is None:
            started = time.monotonic()
        results = await asyncio.gather(*(deliver(m) for m in messages if m.error() is None))
        rings += sum(1 for r in results if r is not None)
        producer.flush()
        consumer.commit(asynchronous=False)

    seconds = time.monotonic() - (started or time.monotonic())
    consumer.close()
    print(json.dumps({"rings": rings, "sent": sent, "seconds": round(seconds, 3),
                      "per_second": round(rings / seconds, 1) if seconds > 0 else 0}))


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
