import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// An access token from the token endpoint.
struct FCMTokenGrant: Sendable {
    /// The token itself (header-safe ASCII, checked). Never logged.
    var accessToken: String
    /// `expires_in`.
    var lifetime: Duration
}

/// Exchanges a signed JWT grant for an access token at the service account's token URI
/// (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`).
struct FCMTokenExchange: Sendable {
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let maximumBody = 64 * 1024

    let http: HTTPClient

    private struct Success: Decodable {
        var access_token: String?
        var expires_in: Double?
        var token_type: String?
    }

    private struct Failure: Decodable {
        var error: String?
        var error_description: String?
    }

    func exchange(assertion: String, tokenURI: String, deadline: NIODeadline) async -> Result<FCMTokenGrant, FCMError> {
        var request = HTTPClientRequest(url: tokenURI)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "accept", value: "application/json")
        // The JWT is base64url and dots: nothing to percent-encode.
        let form = "grant_type=" + Self.grantType.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! + "&assertion=" + assertion
        request.body = .bytes(ByteBuffer(string: form))
        let status: Int
        let body: ByteBuffer
        do {
            let response = try await http.execute(request, deadline: deadline)
            status = Int(response.status.code)
            body = try await response.body.collect(upTo: Self.maximumBody)
        } catch {
            let transport = FCMTransportError.classify(error)
            return .failure(FCMError(.tokenUnavailable, "token endpoint: \(transport.code.rawValue): \(transport.message)"))
        }
        let bytes = Data(body.readableBytesView)
        guard status == 200 else {
            let failure = try? JSONDecoder().decode(Failure.self, from: bytes)
            let name = failure?.error.map { String($0.prefix(64)) } ?? "http-\(status)"
            let detail = failure?.error_description.map { ": " + String($0.prefix(200)) } ?? ""
            // 400/401/403 with an OAuth error name: the grant itself is refused (bad key, unknown account,
            // wrong audience, clock far off). Anything else (429, 5xx, a proxy's page) may pass.
            if [400, 401, 403].contains(status), failure?.error != nil {
                return .failure(FCMError(.tokenRefused, "token endpoint refused the grant (\(status) \(name)\(detail))"))
            }
            return .failure(FCMError(.tokenUnavailable, "token endpoint answered \(status) \(name)\(detail)"))
        }
        guard let success = try? JSONDecoder().decode(Success.self, from: bytes), let token = success.access_token,
            Self.isHeaderSafe(token)
        else {
            return .failure(FCMError(.tokenUnavailable, "token endpoint answered 200 without a usable access_token"))
        }
        if let type = success.token_type, type.lowercased() != "bearer" {
            return .failure(FCMError(.tokenUnavailable, "token endpoint answered token_type '\(type.prefix(20))', expected Bearer"))
        }
        let seconds = success.expires_in ?? 3600
        guard seconds.isFinite, seconds >= 1, seconds <= 86_400 else {
            return .failure(FCMError(.tokenUnavailable, "token endpoint answered expires_in \(seconds), expected 1...86400"))
        }
        return .success(FCMTokenGrant(accessToken: token, lifetime: .milliseconds(Int64(seconds * 1000))))
    }

    /// Visible ASCII without spaces, at most 4 KiB: it goes into a header line.
    static func isHeaderSafe(_ token: String) -> Bool {
        let utf8 = token.utf8
        return !utf8.isEmpty && utf8.count <= 4096 && utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
