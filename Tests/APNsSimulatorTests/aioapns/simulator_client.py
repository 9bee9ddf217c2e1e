"""The UNMODIFIED aioapns client pointed at the callpush APNs simulator: one home for the setup that
send_voip.py (the interop test and `callpush-bench apns`) and Benchmarks/peers/python_push_worker.py
(`callpush-bench drain`) share.

aioapns has no host/port option, so its protocol classes are pointed at the simulator (class
attributes APNS_SERVER / APNS_PORT) and the simulator's CA is trusted through an SSL context. The
library code itself is not changed. Importing this module raises ImportError when aioapns is missing.
"""
import ssl

from aioapns import APNs
from aioapns import connection as aioapns_connection


def simulator_client(host, port, ca, key, key_id, team_id, topic, connections):
    """An aioapns client (token auth, sandbox) sending to host:port and trusting only the CA file `ca`;
    `key` is the path of the .p8 signing key."""
    for protocol in (aioapns_connection.APNsDevelopmentClientProtocol, aioapns_connection.APNsProductionClientProtocol):
        protocol.APNS_SERVER = host
        protocol.APNS_PORT = port
    context = ssl.create_default_context(cafile=ca)
    context.set_alpn_protocols(["h2"])
    with open(key) as handle:
        key_pem = handle.read()
    return APNs(key=key_pem, key_id=key_id, team_id=team_id, topic=topic,
                use_sandbox=True, ssl_context=context, max_connections=connections)
