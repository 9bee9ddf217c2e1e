#!/usr/bin/env python3
"""Send VoIP pushes to the callpush APNs simulator with the UNMODIFIED aioapns library.

simulator_client.py points the library at the simulator (aioapns has no host/port option); the
library code itself is not changed.

Prints one JSON line: {"sent": N, "ok": K, "statuses": {...}, "seconds": T, "per_second": R, "ids": [...]}.
Exit status 0 when every push got 200, 1 otherwise, 2 when aioapns is missing.
"""
import argparse
import asyncio
import json
import sys
import time
import uuid

try:
    from aioapns import NotificationRequest, PushType
    from simulator_client import simulator_client
except ImportError as error:  # CI provisions aioapns; say so clearly instead of a traceback.
    print(f"aioapns is not installed: {error} (pip install aioapns)", file=sys.stderr)
    sys.exit(2)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True, help="PEM file of the simulator CA")
    parser.add_argument("--key", required=True, help=".p8 private key file")
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--team-id", required=True)
    parser.add_argument("--topic", required=True, help="bundle id + .voip")
    parser.add_argument("--token", required=True, help="device token (hex)")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--ttl", type=int, default=30, help="seconds until apns-expiration")
    parser.add_argument("--call-id", default=None)
    return parser.parse_args()


async def main(args):
    client = simulator_client(args.host, args.port, args.ca, args.key, args.key_id, args.team_id, args.topic,
                              args.connections)
    call_id = args.call_id or str(uuid.uuid4())
    semaphore = asyncio.Semaphore(args.concurrency)
    statuses = {}
    ids = []

    async def send(index):
        request = NotificationRequest(
            device_token=args.token,
            message={"aps": {}, "callId": call_id, "handle": "driver-1234", "index": index},
            push_type=PushType.VOIP,
            priority=10,
            time_to_live=args.ttl,
        )
        async with semaphore:
            result = await client.send_notification(request)
        statuses[str(result.status)] = statuses.get(str(result.status), 0) + 1
        if len(ids) < 10:
            ids.append(result.notification_id)

    started = time.perf_counter()
    await asyncio.gather(*(send(i) for i in range(args.count)))
    seconds = time.perf_counter() - started
    client.pool.close()
    ok = statuses.get("200", 0)
    print(json.dumps({
        "sent": args.count, "ok": ok, "statuses": statuses, "seconds": seconds,
        "per_second": args.count / seconds if seconds > 0 else 0.0, "ids": ids, "callId": call_id,
    }))
    return 0 if ok == args.count else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
