import Crypto
import Foundation

/// Builds APNs provider tokens: ES256 JWTs with header `{"alg":"ES256","kid":…}` and claims `{"iss":…,"iat":…}`.
enum APNSJWT {
    /// Signs a token issued at `issuedAt`. The signature is the raw 64-byte r‖s form, base64url encoded.
    static func make(key: APNSSigningKey, issuedAt: Date) throws -> String {
        // keyID / teamID are validated alphanumeric, so no JSON escaping is needed.
        let header = #"{"alg":"ES256","kid":""# + key.keyID + #""}"#
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let claims = #"{"iss":""# + key.teamID + #"","iat":"# + String(iat) + "}"
        let signingInput = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + base64URL(signature.rawRepresentation)
    }

    /// Base64url without padding (RFC 7515).
    static func base64URL(_ data: Data) -> String {
        var text = data.base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-")
        text = text.replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}
