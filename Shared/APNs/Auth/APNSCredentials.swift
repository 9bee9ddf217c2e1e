import NIOSSL

/// How an app authenticates to APNs.
public enum APNSCredentials: Sendable {
    /// Token auth with a `.p8` key. Apps sharing a key share its token and its connections.
    case token(APNSSigningKey)
    /// Certificate auth (one certificate per app, with its own connections).
    case certificate(APNSClientCertificate)
}

/// A TLS client certificate for certificate-based APNs auth.
public struct APNSClientCertificate: Sendable {
    /// Leaf first.
    public let certificateChain: [NIOSSLCertificate]
    /// The certificate's private key. Never logged.
    public let privateKey: NIOSSLPrivateKey

    public init(certificateChain: [NIOSSLCertificate], privateKey: NIOSSLPrivateKey) {
        self.certificateChain = certificateChain
        self.privateKey = privateKey
    }

    /// Loads a PKCS#12 (`.p12`) bundle as exported from Keychain Access.
    public static func pkcs12(path: String, password: String) throws(APNSCredentialError) -> APNSClientCertificate {
        do {
            let bundle = try NIOSSLPKCS12Bundle(file: path, passphrase: Array(password.utf8))
            return APNSClientCertificate(certificateChain: bundle.certificateChain, privateKey: bundle.privateKey)
        } catch {
            throw APNSCredentialError(.invalidCertificate, "cannot load PKCS#12 bundle at \(path) (wrong password or format)")
        }
    }

    /// Loads a PEM certificate (chain) file and a PEM private key file.
    public static func pem(certificatePath: String, privateKeyPath: String) throws(APNSCredentialError) -> APNSClientCertificate {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw APNSCredentialError(.invalidCertificate, "cannot read PEM certificate at \(certificatePath)")
        }
        guard !chain.isEmpty else {
            throw APNSCredentialError(.invalidCertificate, "no certificate in \(certificatePath)")
        }
        do {
            let key = try NIOSSLPrivateKey(file: privateKeyPath, format: .pem)
            return APNSClientCertificate(certificateChain: chain, privateKey: key)
        } catch {
            throw APNSCredentialError(.invalidCertificate, "cannot read PEM private key at \(privateKeyPath)")
        }
    }
}
