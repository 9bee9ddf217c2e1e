#!/usr/bin/env python3
"""Send FCM messages to the callpush FCM simulator with the UNMODIFIED firebase-admin library.

firebase-admin has no option for the FCM endpoint, so this script sets the class constant
`messaging._MessagingService.FCM_URL` (read when the messaging service is created, i.e. before the
first send) to the simulator's URL, and mounts for it the same 100-connection requests adapter the
library mounts for https://fcm.googleapis.com. The service-account JSON's `token_uri` points at the
simulator's token endpoint, and the simulator's CA is trusted through REQUESTS_CA_BUNDLE (set by the
caller). The library code itself is not changed.

Modes:
  interop  one high-priority data message (must be accepted), then malformed ones (must get FCM's
           errors, raised by firebase-admin as its typed exceptions); prints one JSON line.
  bench    --count messages with send_each_for_multicast (500 tokens per call); prints one JSON line
           {"sent", "ok", "seconds", "per_second"}.
Exit status 0 when everything went as expected, 1 otherwise, 2 when firebase-admin is missing.
"""
import argparse
import json
import sys
import time

try:
    import firebase_admin
    import requests
    from firebase_admin import credentials, messaging, exceptions
    from firebase_admin import _http_client
except ImportError as error:  # CI provisions firebase-admin; say so clearly instead of a traceback.
    print(f"firebase-admin is not installed: {error} (pip install firebase-admin)", file=sys.stderr)
    sys.exit(2)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", required=True, help="https://127.0.0.1:PORT of the simulator")
    parser.add_argument("--service-account", required=True, help="service-account JSON written by the simulator")
    parser.add_argument("--mode", choices=["interop", "bench"], default="interop")
    parser.add_argument("--token", default="fcm-token-interop:APA91bHun4MxP5egoKMwt2KZFBaFUH")
    parser.add_argument("--unregistered-token", default=None)
    parser.add_argument("--call-id", default="call-1")
    parser.add_argument("--count", type=int, default=1000)
    return parser.parse_args()


def point_at_simulator(base_url):
    messaging._MessagingService.FCM_URL = base_url + "/v1/projects/{0}/messages:send"
    app = firebase_admin.initialize_app(credentials.Certificate(ARGS.service_account))
    service = messaging._get_messaging_service(app)
    service._client.session.mount(base_url, requests.adapters.HTTPAdapter(
        pool_connections=100, pool_maxsize=100, max_retries=_http_client.DEFAULT_RETRY_CONFIG))
    return app


def data_message(token, call_id, data=None):
    return messaging.Message(
        token=token,
        data=data if data is not None else {"callId": call_id, "handle": "driver-1234", "kind": "ring"},
        android=messaging.AndroidConfig(priority="high", ttl=30, collapse_key=call_id, direct_boot_ok=True),
    )


def describe(error):
    response = getattr(error, "http_response", None)
    return {
        "class": type(error).__name__,
        "code": getattr(error, "code", None),
        "status": response.status_code if response is not None else None,
        "message": str(error)[:200],
    }


def interop(app):
    result = {"name": None, "errors": {}}
    result["name"] = messaging.send(data_message(ARGS.token, ARGS.call_id), app=app)
    malformed = {
        "too-big": data_message(ARGS.token, ARGS.call_id, {"blob": "x" * 5000}),
        "bad-token": data_message("not a registration token!", ARGS.call_id),
        "reserved-key": data_message(ARGS.token, ARGS.call_id, {"from": "me"}),
    }
    if ARGS.unregistered_token:
        malformed["unregistered"] = data_message(ARGS.unregistered_token, ARGS.call_id)
    for case, message in malformed.items():
        try:
            messaging.send(message, app=app)
            result["errors"][case] = {"class": None}
        except exceptions.FirebaseError as error:
            result["errors"][case] = describe(error)
    print(json.dumps(result))
    expected = all(value.get("class") for value in result["errors"].values()) and result["name"]
    return 0 if expected else 1


def bench(app):
    ok = 0
    sent = 0
    started = time.perf_counter()
    while sent < ARGS.count:
        batch = min(500, ARGS.count - sent)
        tokens = [f"{ARGS.token}-{sent + index}" for index in range(batch)]
        response = messaging.send_each_for_multicast(messaging.MulticastMessage(
            tokens=tokens, data={"callId": ARGS.call_id, "handle": "driver-1234", "kind": "ring"},
            android=messaging.AndroidConfig(priority="high", ttl=30, collapse_key=ARGS.call_id, direct_boot_ok=True)), app=app)
        ok += response.success_count
        sent += batch
    seconds = time.perf_counter() - started
    print(json.dumps({"sent": sent, "ok": ok, "seconds": seconds, "per_second": sent / seconds if seconds > 0 else 0.0}))
    return 0 if ok == sent else 1


if __name__ == "__main__":
    ARGS = parse_args()
    application = point_at_simulator(ARGS.base_url)
    sys.exit(interop(application) if ARGS.mode == "interop" else bench(application))
