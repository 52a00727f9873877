/** What a creator's server needs to onboard a source and push signed signals. */
export { GatewayClient, type GatewayResponse, type OnboardedSource, type OnboardOptions } from './gateway-client.js'
export { creatorKeyFromSeed, generateCreatorKey, signingString, signPush, type CreatorKey, type SignedPush } from './signing.js'
