// placeholder: replaced by the Kafka implementation
public enum KafkaPlaceholder {}
