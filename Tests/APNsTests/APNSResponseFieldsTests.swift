import NIOHPACK
import Testing

@testable import APNs

/// The client's HTTP/2 connection runs without NIO's header block validation (it costs ~5 % of the worker's
/// CPU); what it sends and the three fields it reads are checked by the client itself.
@Suite struct APNSResponseFieldsTests {
    static let id = "6f1a4b1e-59d5-4c0b-9c40-0b7e3d2f1a77"

    static func block(_ fields: [(String, String)]) -> HPACKHeaders { HPACKHeaders(fields) }

    @Test func wellFormedFieldsAreRead() {
        let fields = APNSConnectionHandler.responseFields(
            Self.block([(":status", "200"), ("apns-id", Self.id.uppercased()), ("apns-unique-id", Self.id), ("x-other", "\r\n")]))
        #expect(fields.status == 200)
        #expect(fields.apnsID == Self.id.uppercased())
        #expect(fields.uniqueID == Self.id)
        #expect(APNSConnectionHandler.responseFields(Self.block([(":status", "410")])).status == 410)
    }

    @Test func aMalformedOrRepeatedStatusIsNoStatus() {
        for status in ["20", "2000", "+20", "2 0", "20\r", "٢٠٠", "", "0x1"] {
            #expect(APNSConnectionHandler.responseFields(Self.block([(":status", status)])).status == nil, "\(status)")
        }
        #expect(APNSConnectionHandler.responseFields(Self.block([])).status == nil)
        #expect(APNSConnectionHandler.responseFields(Self.block([(":status", "200"), (":status", "400")])).status == nil)
        #expect(APNSConnectionHandler.responseFields(Self.block([(":status", "200"), (":status", "200")])).status == nil)
    }

    @Test func idsThatAreNotUUIDTextAreDropped() {
        for value in [Self.id + "\r\nx-injected: 1", String(Self.id.dropLast()), Self.id.replacingOccurrences(of: "-", with: "_"),
                      "g" + Self.id.dropFirst(), "\u{0}" + Self.id.dropFirst(), String(repeating: "a", count: 36), ""] {
            let fields = APNSConnectionHandler.responseFields(Self.block([(":status", "200"), ("apns-id", value), ("apns-unique-id", value)]))
            #expect(fields.status == 200)
            #expect(fields.apnsID == nil, "\(value)")
            #expect(fields.uniqueID == nil, "\(value)")
        }
    }

    @Test func bundleIDsAndHostsSentInHeadersAreChecked() throws {
        #expect(APNSApp.isValidBundleID("com.example.rider-2"))
        for bad in ["", "com.example rider", "com.example\r\nrider", "com.example/rider", "com.exämple", "com.example\u{0}",
                    String(repeating: "a", count: 156)] {
            #expect(!APNSApp.isValidBundleID(bad), "\(bad)")
        }
        #expect(APNSEndpoint(host: "api.push.apple.com").hasValidHost)
        #expect(APNSEndpoint(host: "127.0.0.1").hasValidHost)
        #expect(APNSEndpoint(host: "[::1]").hasValidHost)
        for bad in ["", "api.push.apple.com\r\nx: y", "a b", "host/path", "hôst"] {
            var configuration = APNSClientConfiguration()
            configuration.sandboxEndpoint = APNSEndpoint(host: bad)
            #expect(throws: APNSCredentialError.self, "\(bad)") { try configuration.validate() }
        }
    }
}
