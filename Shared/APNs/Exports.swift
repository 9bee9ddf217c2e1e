// The model types (``APNSEnvironment``, ``APNSReason``) live in APNsCore, shared with the contract and
// the simulator; users of the client import only `APNs`.
@_exported import APNsCore
