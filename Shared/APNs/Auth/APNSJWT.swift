import Crypto
import Foundation
import PushClientSupport

/// Builds APNs provider tokens: ES256 JWTs with header `{"alg":"ES256","kid":…}` and claims `{"iss":…,"iat":…}`.
enum APNSJWT {
    /// Signs a token issued at `issuedAt`. The signature is the raw 64-byte r‖s form, base64url encoded.
    static func make(key: APNSSigningKey, issuedAt: Date) throws -> String {
        // keyID / teamID are validated alphanumeric, so no JSON escaping is needed.
        let header = #"{"alg":"ES256","kid":""# + key.keyID + #""}"#
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let claims = #"{"iss":""# + key.teamID + #"","iat":"# + String(iat) + "}"
        let signingInput = Base64URL.encode(Data(header.utf8)) + "." + Base64URL.encode(Data(claims.utf8))
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}
