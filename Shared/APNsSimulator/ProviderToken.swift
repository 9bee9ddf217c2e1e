import Crypto
import Foundation

/// A parsed and signature-checked provider token (ES256 JWT), or the APNs reason it is refused with.
struct ProviderToken: Sendable, Equatable {
    /// `kid` from the JWT header.
    var keyID: String
    /// `iss` claim.
    var teamID: String
    /// `iat` claim, seconds since 1970.
    var issuedAt: Int64

    /// Parses `authorization` header value `bearer <jwt>` and verifies the signature with the key named by
    /// `kid`. Returns the APNs reason on failure (always `InvalidProviderToken` here; the age and update-rate
    /// checks happen later against shared state).
    static func verify(
        authorization: Substring,
        keys: [String: APNSSimulatorConfiguration.TokenKey]
    ) -> Result<ProviderToken, APNSReason> {
        let invalid = Result<ProviderToken, APNSReason>.failure(.invalidProviderToken)
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return invalid }
        let jwt = authorization.dropFirst(7).drop(while: { $0 == " " })
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Base64URL.decode(parts[0]),
            let claimsData = Base64URL.decode(parts[1]),
            let signatureData = Base64URL.decode(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any],
            header["alg"] as? String == "ES256",
            let keyID = header["kid"] as? String,
            let teamID = claims["iss"] as? String,
            let issuedAt = Self.integer(claims["iat"])
        else { return invalid }
        guard let key = keys[keyID], key.teamID == teamID else { return invalid }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData) else { return invalid }
        // The signing input is the ASCII text `header.claims` as sent.
        let signingInput = Data(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard let publicKey = try? key.publicKey, publicKey.isValidSignature(signature, for: signingInput) else {
            return invalid
        }
        return .success(ProviderToken(keyID: keyID, teamID: teamID, issuedAt: issuedAt))
    }

    private static func integer(_ value: Any?) -> Int64? {
        switch value {
        case let integer as Int:
            return Int64(integer)
        case let double as Double:
            guard double.isFinite, abs(double) < 1e15 else { return nil }
            return Int64(double)
        default:
            return nil
        }
    }
}

/// Base64url without padding (RFC 7515).
enum Base64URL {
    static func decode(_ text: Substring) -> Data? {
        guard text.utf8.count < 16_384 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        switch base64.utf8.count % 4 {
        case 2: base64 += "=="
        case 3: base64 += "="
        case 1: return nil
        default: break
        }
        return Data(base64Encoded: base64)
    }

    static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
