// A device's `environment` is the APNs model's ``APNSEnvironment``: one environment type for the
// contract, the APNs client, the simulator and the worker. Users of the contract import only
// `CallContract`. (`scripts/fuzz` compiles the model's sources into the contract module instead.)
#if canImport(APNsCore)
@_exported import APNsCore
#endif
