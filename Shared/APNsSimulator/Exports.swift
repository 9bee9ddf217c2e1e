// The simulator imitates an ``APNSEnvironment`` and answers with ``APNSReason``s: the APNs model shared
// with the client and the contract. Users of the simulator import only `APNsSimulator`.
@_exported import APNsCore
