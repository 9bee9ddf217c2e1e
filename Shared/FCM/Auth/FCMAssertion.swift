import Crypto
import Foundation
import PushClientSupport
import _CryptoExtras

/// The OAuth2 JWT grant of a service account (RFC 7523, Google's "two-legged OAuth"): an RS256 JWT with
/// header `{"alg":"RS256","typ":"JWT","kid":<private_key_id>}` and claims `iss` (client email), `scope`,
/// `aud` (the token URI), `iat` and `exp` (one hour later, Google's maximum).
enum FCMAssertion {
    /// The scope that allows `messages:send`.
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// How long a grant is valid (Google refuses longer ones).
    static let lifetime: TimeInterval = 3600

    private struct Header: Encodable {
        let alg = "RS256"
        let typ = "JWT"
        let kid: String?
    }

    private struct Claims: Encodable {
        let iss: String
        let scope: String
        let aud: String
        let iat: Int64
        let exp: Int64
    }

    static func make(account: FCMServiceAccount, issuedAt: Date) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let header = try encoder.encode(Header(kid: account.privateKeyID))
        let claims = try encoder.encode(
            Claims(iss: account.clientEmail, scope: scope, aud: account.tokenURI, iat: iat, exp: iat + Int64(lifetime)))
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try account.privateKey.signature(for: SHA256.hash(data: Data(signingInput.utf8)), padding: .insecurePKCS1v1_5)
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}
