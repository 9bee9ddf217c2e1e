// placeholder: replaced by the APNs implementation
public enum APNsPlaceholder {}
