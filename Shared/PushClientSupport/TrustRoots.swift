import NIOSSL

/// A PEM trust root that could not be read.
public struct UnreadableTrustRoot: Error, Sendable {}

extension TLSConfiguration {
    /// Trusts the CA certificates in `pems` (e.g. a simulator's CA): in addition to the system's
    /// roots, or instead of them when `only`. Nothing changes when `pems` is empty.
    public mutating func trust(caPEMs pems: [String], only: Bool) throws(UnreadableTrustRoot) {
        guard !pems.isEmpty else { return }
        var extra: [NIOSSLCertificate] = []
        for pem in pems {
            do {
                extra += try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8))
            } catch {
                throw UnreadableTrustRoot()
            }
        }
        if only {
            trustRoots = .certificates(extra)
        } else {
            additionalTrustRoots = [.certificates(extra)]
        }
    }
}
