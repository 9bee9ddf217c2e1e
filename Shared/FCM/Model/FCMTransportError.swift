import AsyncHTTPClient
import NIOCore
import NIOPosix
import NIOSSL

/// Maps AsyncHTTPClient's and NIO's errors to the stable ``FCMError`` codes.
enum FCMTransportError {
    static func classify(_ error: any Error) -> FCMError {
        if error is CancellationError {
            return FCMError(.cancelled, "the send was cancelled")
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout:
                return FCMError(.timeout, "no answer before the deadline")
            case .connectTimeout, .getConnectionFromPoolTimeout:
                return FCMError(.connectFailed, "no connection before the deadline (\(error.shortDescription))")
            case .tlsHandshakeTimeout:
                return FCMError(.tlsFailure, "TLS handshake timed out")
            case .remoteConnectionClosed, .uncleanShutdown:
                return FCMError(.connectionLost, "connection closed before the answer; the message may have been delivered")
            case .cancelled, .requestStreamCancelled:
                return FCMError(.cancelled, "the request was cancelled")
            case .alreadyShutdown:
                return FCMError(.shuttingDown, "the HTTP client is shut down")
            default:
                return FCMError(.transportFailure, error.shortDescription)
            }
        }
        if error is NIOTooManyBytesError {
            return FCMError(.protocolError, "answer body over the client's bound")
        }
        if error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError {
            return FCMError(.tlsFailure, "TLS failed: \(error)")
        }
        if error is NIOConnectionError || error is IOError {
            return FCMError(.connectFailed, "connect failed: \(error)")
        }
        if let channelError = error as? ChannelError {
            switch channelError {
            case .connectTimeout: return FCMError(.connectFailed, "connect timed out")
            case .ioOnClosedChannel, .alreadyClosed, .eof, .outputClosed, .inputClosed:
                return FCMError(.connectionLost, "connection closed: \(channelError)")
            default: return FCMError(.transportFailure, "\(channelError)")
            }
        }
        return FCMError(.transportFailure, "\(type(of: error)): \(error)")
    }
}
