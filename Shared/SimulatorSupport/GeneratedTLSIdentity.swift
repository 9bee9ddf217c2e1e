import Crypto
import Foundation
import SwiftASN1
import X509

/// A freshly generated TLS identity in PEM: a CA (CA:TRUE, keyCertSign) and a server certificate signed by it
/// (serverAuth and clientAuth; SANs `localhost`, `127.0.0.1`, `::1`), so strict verifiers (OpenSSL X509_STRICT, BoringSSL)
/// accept the chain. Used by the simulator when no files are given; also handy for other local test servers.
public struct GeneratedTLSIdentity: Sendable {
    /// Server certificate followed by the CA certificate.
    public var certificateChainPEM: String
    /// The server certificate's P-256 private key (PKCS#8).
    public var privateKeyPEM: String
    /// The CA certificate clients must trust.
    public var caCertificatePEM: String

    /// Generates a new identity valid from one hour ago for one year; `caCommonName` names the CA.
    public static func generate(caCommonName: String = "callpush simulator CA") throws -> GeneratedTLSIdentity {
        do {
            let now = Date()
            let notBefore = now.addingTimeInterval(-3600)
            let notAfter = now.addingTimeInterval(365 * 24 * 3600)

            let caKey = P256.Signing.PrivateKey()
            let caPublic = Certificate.PublicKey(caKey.publicKey)
            let caName = try DistinguishedName {
                OrganizationName("callpush")
                CommonName(caCommonName)
            }
            let caSKI = SubjectKeyIdentifier(hash: caPublic)
            let ca = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: caPublic,
                notValidBefore: notBefore,
                notValidAfter: notAfter,
                issuer: caName,
                subject: caName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    caSKI
                },
                issuerPrivateKey: Certificate.PrivateKey(caKey)
            )

            let leafKey = P256.Signing.PrivateKey()
            let leafPublic = Certificate.PublicKey(leafKey.publicKey)
            let leafName = try DistinguishedName {
                OrganizationName("callpush")
                CommonName("localhost")
            }
            let leaf = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: leafPublic,
                notValidBefore: notBefore,
                notValidAfter: notAfter,
                issuer: caName,
                subject: leafName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    try ExtendedKeyUsage([.serverAuth, .clientAuth])
                    SubjectAlternativeNames([
                        .dnsName("localhost"),
                        .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                        .ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
                    ])
                    SubjectKeyIdentifier(hash: leafPublic)
                    AuthorityKeyIdentifier(keyIdentifier: caSKI.keyIdentifier)
                },
                issuerPrivateKey: Certificate.PrivateKey(caKey)
            )

            let caPEM = try ca.serializeAsPEM().pemString
            let leafPEM = try leaf.serializeAsPEM().pemString
            return GeneratedTLSIdentity(
                certificateChainPEM: leafPEM + "\n" + caPEM + "\n",
                privateKeyPEM: leafKey.pemRepresentation,
                caCertificatePEM: caPEM + "\n"
            )
        } catch {
            throw GeneratedTLSIdentityError(message: "cannot generate a certificate: \(error)")
        }
    }
}

/// Generating a TLS identity failed (never expected: only swift-certificates' own errors end here).
public struct GeneratedTLSIdentityError: Error, Sendable, CustomStringConvertible {
    /// What failed.
    public var message: String
    public var description: String { message }
}
