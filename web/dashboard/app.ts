import './dashboard.css'
import { api, ApiFailure, apiText } from './api-client.js'
import { creatorView } from './creator-view.js'
import { operatorView } from './operator-view.js'
import { renterView } from './renter-view.js'
import { tabToken } from './session.js'
import { ViewScope } from './view-scope.js'

/**
 * The dashboard: sign in with a token, then the view of its role. Who the token is comes
 * from `GET /v1/usage` (its role and subject); a metrics token, which reads no usage,
 * is told apart by `/metrics` answering it.
 */
const form = document.getElementById('sign-in') as HTMLFormElement
const input = document.getElementById('token') as HTMLInputElement
const failure = document.getElementById('sign-in-error') as HTMLElement
const who = document.getElementById('who') as HTMLElement
const signOut = document.getElementById('sign-out') as HTMLButtonElement
const view = document.getElementById('view') as HTMLElement
let scope: ViewScope | undefined

async function roleOf(): Promise<{ role: string; subject: string }> {
  try {
    return (await api<{ role: string; subject: string }>('GET', '/v1/usage')).data
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 403) {
      await apiText('/metrics')
      return { role: 'metrics', subject: '' }
    }
    throw err
  }
}

async function start(): Promise<void> {
  const { role, subject } = await roleOf()
  form.hidden = true
  signOut.hidden = false
  who.textContent = `${role}${subject === '' ? '' : ` ${subject}`}`
  document.body.dataset['role'] = role
  scope = new ViewScope()
  if (role === 'creator') creatorView(view, scope)
  else if (role === 'renter') renterView(view, scope)
  else operatorView(view, scope)
}

function stop(): void {
  scope?.stop()
  scope = undefined
  tabToken.clear()
  view.replaceChildren()
  who.textContent = ''
  delete document.body.dataset['role']
  signOut.hidden = true
  form.hidden = false
}

form.addEventListener('submit', (e) => {
  e.preventDefault()
  failure.textContent = ''
  tabToken.set(input.value.trim())
  input.value = ''
  start().catch((err: unknown) => {
    stop()
    failure.textContent = err instanceof ApiFailure ? `${err.code}: ${err.message}` : String(err)
  })
})
signOut.addEventListener('click', stop)

if (tabToken.get() !== null) start().catch(stop)
