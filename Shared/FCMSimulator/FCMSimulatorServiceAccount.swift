import Foundation
import _CryptoExtras
import Locking

/// A service account the simulator accepts JWT grants from: its project, client email, key id and RSA key.
///
/// The simulator generates one (a throwaway key) or is given one; ``json(tokenURI:)`` writes the JSON file a
/// client needs, with `token_uri` pointing at the simulator.
public struct FCMSimulatorServiceAccount: Sendable, CustomStringConvertible {
    /// `project_id`.
    public var projectID: String
    /// `client_email` (the grant's `iss`).
    public var clientEmail: String
    /// `private_key_id` (the grant's `kid`).
    public var privateKeyID: String
    /// The RSA private key as PKCS#8 PEM, when the simulator has it (generated, or read from a service-account
    /// JSON); `nil` when only the public key was given.
    public var privateKeyPEM: String?
    /// Verifies grant signatures.
    public var publicKey: _RSA.Signing.PublicKey

    /// Generates a 2048-bit RSA key for a service account of `projectID`.
    public static func generate(projectID: String = "callpush-simulator") throws -> FCMSimulatorServiceAccount {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        return FCMSimulatorServiceAccount(
            projectID: projectID, clientEmail: "firebase-adminsdk@\(projectID).iam.gserviceaccount.com",
            privateKeyID: Hex.random(bytes: 20),
            privateKeyPEM: key.pkcs8PEMRepresentation, publicKey: key.publicKey)
    }

    /// A service account from its parts.
    public init(projectID: String, clientEmail: String, privateKeyID: String, privateKeyPEM: String?, publicKey: _RSA.Signing.PublicKey) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.privateKeyPEM = privateKeyPEM
        self.publicKey = publicKey
    }

    /// Reads a service-account JSON (`project_id`, `client_email`, `private_key_id`, `private_key`).
    public init(json: some Collection<UInt8>) throws {
        let wire: ServiceAccountWire
        do {
            wire = try JSONDecoder().decode(ServiceAccountWire.self, from: Data(json))
        } catch {
            throw FCMSimulatorError.invalidConfiguration("service account JSON needs project_id, client_email and private_key")
        }
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: wire.private_key)
        } catch {
            throw FCMSimulatorError.invalidConfiguration("service account \(wire.client_email): private_key is not an RSA key PEM")
        }
        self.init(
            projectID: wire.project_id, clientEmail: wire.client_email, privateKeyID: wire.private_key_id ?? "",
            privateKeyPEM: key.pkcs8PEMRepresentation, publicKey: key.publicKey)
    }

    /// The service-account JSON a client (our FCM client, firebase-admin) reads, with `token_uri` set to the
    /// simulator's token endpoint. Holds the private key: write it to a file only the test or developer reads.
    public func json(tokenURI: String) throws -> String {
        guard let privateKeyPEM else {
            throw FCMSimulatorError.invalidConfiguration("service account \(clientEmail) has no private key to write")
        }
        let object: [String: String] = [
            "type": "service_account",
            "project_id": projectID,
            "private_key_id": privateKeyID,
            "private_key": privateKeyPEM,
            "client_email": clientEmail,
            "client_id": "100000000000000000000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": tokenURI,
        ]
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    public var description: String { "FCMSimulatorServiceAccount(\(clientEmail), project: \(projectID))" }
}

/// The fields of a service-account JSON the simulator reads.
private struct ServiceAccountWire: Decodable {
    var project_id: String
    var client_email: String
    var private_key_id: String?
    var private_key: String
}
