import Foundation
import Testing
@testable import CallContract

/// A contract event type as the tests round-trip it.
protocol RoundTripping: Equatable {
    static func decode(_ data: Data) throws(ContractError) -> Self
    func encoded() throws -> Data
}

extension CallRequest: RoundTripping {}
extension CallStatus: RoundTripping {}

/// Decoding `encoded` gives `value` back, and encoding that again gives the same bytes.
func expectRoundTrip<Event: RoundTripping>(_ value: Event, _ encoded: Data,
                                           sourceLocation: SourceLocation = #_sourceLocation) throws {
    let decoded = try Event.decode(encoded)
    #expect(decoded == value, sourceLocation: sourceLocation)
    #expect(try decoded.encoded() == encoded, sourceLocation: sourceLocation)
}
