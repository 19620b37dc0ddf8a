import { IOREDIS_6_RESP2 } from '../helpers/client-cells.js';
import { clientCellContract } from './client-cell-contract.js';

clientCellContract(IOREDIS_6_RESP2);
