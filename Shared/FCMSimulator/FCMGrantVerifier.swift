import Crypto
import Foundation
import _CryptoExtras

/// Checks an OAuth2 JWT grant (RFC 7523) like Google's token endpoint: RS256 signature by a known service
/// account's key (`kid` must match when given), `aud` = the token URI (or Google's), a `scope` that allows FCM, and a
/// short-lived `iat`/`exp` pair.
enum FCMGrantVerifier {
    /// An OAuth error answer (`{"error": …, "error_description": …}`).
    struct Refusal: Error, Equatable {
        var status: Int
        var error: String
        var description: String

        var body: String {
            let data = (try? JSONSerialization.data(withJSONObject: ["error": error, "error_description": description], options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
    }

    static let jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Google's own token endpoints: google-auth (firebase-admin) always signs its grants for the first one,
    /// whatever `token_uri` it posts them to; Google accepts both.
    static let googleAudiences: Set<String> = ["https://oauth2.googleapis.com/token", "https://www.googleapis.com/oauth2/v4/token"]
    static let acceptedScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]

    private struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    private struct Claims: Decodable {
        var iss: String?
        var scope: String?
        var aud: String?
        var iat: Double?
        var exp: Double?
    }

    /// Verifies `assertion`; returns the service account it authenticates.
    static func verify(
        assertion: String, accounts: [FCMSimulatorServiceAccount], audiences: Set<String>, now: Date
    ) -> Result<FCMSimulatorServiceAccount, Refusal> {
        let invalid = { (text: String) in Refusal(status: 400, error: "invalid_grant", description: text) }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = base64URLDecode(parts[0]), let claimBytes = base64URLDecode(parts[1]),
            let signature = base64URLDecode(parts[2]),
            let header = try? JSONDecoder().decode(Header.self, from: headerBytes),
            let claims = try? JSONDecoder().decode(Claims.self, from: claimBytes)
        else { return .failure(invalid("Invalid JWT: the assertion is not a JWT.")) }
        guard header.alg == "RS256" else { return .failure(invalid("Invalid JWT: alg must be RS256.")) }
        guard let issuer = claims.iss, let account = accounts.first(where: { $0.clientEmail == issuer }) else {
            return .failure(invalid("Invalid grant: account not found"))
        }
        if let kid = header.kid, !account.privateKeyID.isEmpty, kid != account.privateKeyID {
            return .failure(invalid("Invalid JWT Signature."))
        }
        let signingInput = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
        guard account.publicKey.isValidSignature(
            _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signingInput), padding: .insecurePKCS1v1_5)
        else { return .failure(invalid("Invalid JWT Signature.")) }
        guard let audience = claims.aud, audiences.contains(audience) || googleAudiences.contains(audience) else {
            return .failure(invalid("Invalid JWT: Failed audience check. The expected value is the token URI."))
        }
        let nowSeconds = now.timeIntervalSince1970
        guard let iat = claims.iat, let exp = claims.exp, exp > iat, exp - iat <= 3600, exp > nowSeconds, iat <= nowSeconds + 300
        else {
            return .failure(invalid(
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."))
        }
        let scopes = Set((claims.scope ?? "").split(separator: " ").map(String.init))
        guard !scopes.isDisjoint(with: acceptedScopes) else {
            return .failure(Refusal(status: 400, error: "invalid_scope", description: "No scope that allows Firebase Cloud Messaging was requested."))
        }
        return .success(account)
    }

    /// Parses an `application/x-www-form-urlencoded` body.
    static func formFields(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            guard let name = halves.first else { continue }
            fields[decode(name)] = halves.count == 2 ? decode(halves[1]) : ""
        }
        return fields
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
