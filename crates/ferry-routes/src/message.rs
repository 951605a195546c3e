//! What a condition can see of a message.

/// A message as conditions read it, borrowed from wherever the caller keeps
/// it.
///
/// A trait rather than a struct of slices because the broker keeps user
/// properties as `Vec<(ByteStr, ByteStr)>`: a struct holding
/// `&[(&str, &str)]` would make it build a second vector of borrowed pairs
/// for every routed message, an allocation on the publish path. Behind a
/// trait, the broker's own message answers `user_property` by scanning what
/// it already has. `Message` is the plain-slices implementation, for
/// callers (tests, tools) that have the parts at hand.
pub trait MessageView {
    fn topic(&self) -> &str;
    fn payload(&self) -> &[u8];
    fn qos(&self) -> u8;
    fn client_id(&self) -> &str;
    fn username(&self) -> Option<&str>;
    fn content_type(&self) -> Option<&str>;
    /// The value of the first user property called `name` (MQTT allows
    /// several with one name).
    fn user_property(&self, name: &str) -> Option<&str>;
}

/// A message made of borrowed parts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Message<'a> {
    pub topic: &'a str,
    pub payload: &'a [u8],
    pub qos: u8,
    pub client_id: &'a str,
    pub username: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub user_properties: &'a [(&'a str, &'a str)],
}

impl MessageView for Message<'_> {
    fn topic(&self) -> &str {
        self.topic
    }

    fn payload(&self) -> &[u8] {
        self.payload
    }

    fn qos(&self) -> u8 {
        self.qos
    }

    fn client_id(&self) -> &str {
        self.client_id
    }

    fn username(&self) -> Option<&str> {
        self.username
    }

    fn content_type(&self) -> Option<&str> {
        self.content_type
    }

    fn user_property(&self, name: &str) -> Option<&str> {
        self.user_properties.iter().find(|(key, _)| *key == name).map(|(_, value)| *value)
    }
}
