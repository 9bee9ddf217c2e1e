/// The name of an app in a push client's configuration (e.g. `"rider"`), as used by callpush
/// events. `Client` only keeps the clients' app ids apart (`APNSAppID`, `FCMAppID`).
public struct AppID<Client>: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }
}
