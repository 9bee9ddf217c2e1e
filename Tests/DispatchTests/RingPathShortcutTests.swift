import CallContract
import HTTPTypes
import Hummingbird
import Testing
@testable import DispatchService

/// The ring path's shortcuts give the answers of the slower code they stand in for.
@Suite struct RingPathShortcutTests {
    /// The attributes' control-character check skips the Unicode property lookup for ASCII; every
    /// scalar must get the general category's answer (Cc), C1 controls and DEL included.
    @Test func theControlCheckIsTheGeneralCategorys() {
        let scalars = (0..<0x3000).compactMap(Unicode.Scalar.init) + [0xFEFF, 0x1F600, 0xE0001].compactMap(Unicode.Scalar.init)
        for scalar in scalars {
            let expected = scalar.properties.generalCategory == .control
            #expect(CallSubmission.hasControl("a" + String(scalar) + "b") == expected, "U+\(String(scalar.value, radix: 16))")
        }
        #expect(!CallSubmission.hasControl(""))
    }

    /// The key is read from the `Authorization` field without `HTTPFields`' joined copy; the value
    /// must be the subscript's whatever the fields (none, one, several: joined, never a valid key).
    @Test func theAuthorizationValueIsTheSubscripts() {
        for values in [[], ["Bearer a"], [""], ["Bearer a", "Bearer b"], ["bearer x", "", "Bearer y"]] {
            var fields: HTTPFields = [.contentType: "application/json"]
            for value in values { fields.append(HTTPField(name: .authorization, value: value)) }
            fields.append(HTTPField(name: .contentLength, value: "2"))
            #expect(DispatchAPI.authorizationHeader(fields) == fields[.authorization], "\(values)")
        }
    }
}
